#include "loadgen/gate/gate_main.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "agent/spawn.h"
#include "common/untrusted_text.h"
#include "common/files.h"
#include "loadgen/gate/gate.h"
#include "loadgen/gate/gate_report.h"
#include "loadgen/results/compare.h"
#include "loadgen/results/compare_main.h"

extern char** environ;

ABSL_FLAG(std::string, service, "",
          "gate: the service's command line for both sides: an executable (a path, or a name in "
          "PATH) and its arguments with {port} and {threads}; none: the lab server.");
ABSL_FLAG(std::string, base_command, "", "gate: the base's command line (default --service).");
ABSL_FLAG(std::string, head_command, "", "gate: the head's command line (default --service).");
ABSL_FLAG(std::string, base_dir, "",
          "gate: the base's directory: its runs start there, so the command and relative paths "
          "(--proto, --scenario) resolve in it.");
ABSL_FLAG(std::string, head_dir, "", "gate: the head's directory (see --base_dir).");
ABSL_FLAG(std::string, base_rev, "",
          "gate: a git revision checked out (a shared clone) into OUT/src/base, built with "
          "--build, then run as --base_dir.");
ABSL_FLAG(std::string, head_rev, "", "gate: the head's revision (see --base_rev).");
ABSL_FLAG(std::string, build, "",
          "gate: a shell command run in each checked-out revision before its runs.");
ABSL_FLAG(absl::Duration, build_timeout, absl::Minutes(10), "gate: the longest one --build may take.");
ABSL_FLAG(std::string, repo, "", "gate: the git repository of --base_rev/--head_rev (default .).");
ABSL_FLAG(std::string, base_env, "",
          "gate: NAME=value,... added to the base's environment (its service starts with them).");
ABSL_FLAG(std::string, head_env, "", "gate: NAME=value,... added to the head's environment.");
ABSL_FLAG(std::string, base_args, "", "gate: loadgen flags for the base's runs only.");
ABSL_FLAG(std::string, head_args, "", "gate: loadgen flags for the head's runs only.");
ABSL_FLAG(std::string, ready, "",
          "gate: a regex matching the service's ready line (a (?P<control>...) group gives its "
          "Control address); none: ready once {port} accepts a connection.");
ABSL_FLAG(std::string, report_md, "", "gate: write a Markdown report (for a pull request) here.");
ABSL_FLAG(int, min_repeats, 5, "gate: runs a side before the gate may stop early.");
ABSL_FLAG(int, max_repeats, 20, "gate: runs a side at most.");
ABSL_FLAG(absl::Duration, time_budget, absl::Minutes(10),
          "gate: start no pair that would end after this; the verdict is then what the runs show.");

// compare's, which the gate's verdicts use (loadgen/results/compare_main.cc).
ABSL_DECLARE_FLAG(std::string, gate);
ABSL_DECLARE_FLAG(double, floor_mib);
ABSL_DECLARE_FLAG(double, floor_pct);
ABSL_DECLARE_FLAG(double, alpha);
ABSL_DECLARE_FLAG(std::string, ignore_fingerprint);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::string, plot);

namespace rsslab {
namespace {

using gate::kBase;
using gate::kHead;
using gate::kSideName;

constexpr int kExitRegression = 1;
constexpr int kExitUsage = 2;
constexpr int kExitCantTell = 3;
constexpr int kExitInterrupted = 130;
constexpr char kDefaultGate[] = "rss_under_load,rss_after_idle,rss_after_trim_global";

int Fail(int code, absl::string_view msg) {
  fprintf(stderr, "rsslab_loadgen: gate: %s\n", Echo(msg, 2048).c_str());
  return code;
}

gate::Flags FlagsGiven() {
  gate::Flags f;
  f.service = absl::GetFlag(FLAGS_service);
  f.base_command = absl::GetFlag(FLAGS_base_command);
  f.head_command = absl::GetFlag(FLAGS_head_command);
  f.base_dir = absl::GetFlag(FLAGS_base_dir);
  f.head_dir = absl::GetFlag(FLAGS_head_dir);
  f.base_rev = absl::GetFlag(FLAGS_base_rev);
  f.head_rev = absl::GetFlag(FLAGS_head_rev);
  f.build = absl::GetFlag(FLAGS_build);
  f.build_timeout = absl::GetFlag(FLAGS_build_timeout);
  f.repo = absl::GetFlag(FLAGS_repo);
  f.base_env = absl::GetFlag(FLAGS_base_env);
  f.head_env = absl::GetFlag(FLAGS_head_env);
  f.base_args = absl::GetFlag(FLAGS_base_args);
  f.head_args = absl::GetFlag(FLAGS_head_args);
  f.ready = absl::GetFlag(FLAGS_ready);
  f.out = absl::GetFlag(FLAGS_out);
  f.report_md = absl::GetFlag(FLAGS_report_md);
  f.min_repeats = absl::GetFlag(FLAGS_min_repeats);
  f.max_repeats = absl::GetFlag(FLAGS_max_repeats);
  f.time_budget = absl::GetFlag(FLAGS_time_budget);
  return f;
}

// compare's options from its flags; the gated figures default to RSS under
// load, after the idle wait and after the global trim.
absl::StatusOr<CompareOptions> VerdictOptions() {
  CompareOptions o;
  // Both sides run one scenario at one scale by construction; what compare
  // would still refuse is a cache that never filled, and a head whose
  // cache grew may be just that: compared, and marked FORCED.
  o.force = true;
  o.alpha = absl::GetFlag(FLAGS_alpha);
  o.floor_mib = absl::GetFlag(FLAGS_floor_mib);
  o.floor_pct = absl::GetFlag(FLAGS_floor_pct);
  if (!(o.alpha > 0 && o.alpha < 1) || !(o.floor_mib >= 0 && o.floor_mib <= 1e6) ||
      !(o.floor_pct >= 0 && o.floor_pct <= 1000)) {
    return absl::InvalidArgumentError(
        "--alpha (0 to 1), --floor_mib (0 to 1000000) or --floor_pct (0 to 1000) out of range");
  }
  std::string spec = absl::GetFlag(FLAGS_gate);
  absl::StatusOr<std::vector<int>> g = ParseGateFigures(spec.empty() ? kDefaultGate : spec);
  if (!g.ok()) return g.status();
  o.gate = *g;
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_ignore_fingerprint), ',', absl::SkipWhitespace())) {
    if (absl::Status s = CheckFingerprintKey(k); !s.ok()) return s;
    if (o.ignore_fingerprint.size() < 256) o.ignore_fingerprint.push_back(std::string(k));
  }
  return o;
}

std::string SelfExe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

// Our environment with `extra` (NAME=value) set over it.
std::vector<std::string> EnvWith(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv = *e;
    bool replaced = false;
    for (const std::string& x : extra) {
      replaced = replaced || kv.substr(0, kv.find('=') + 1) == x.substr(0, x.find('=') + 1);
    }
    if (!replaced) env.push_back(std::string(kv));
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// For an error message: the first line of a log saying what FAILED (a
// sweep cell's reason), else its last non-empty line.
std::string LastLine(const std::string& log) {
  absl::StatusOr<std::string> text = ReadFileBounded(log, 64 << 20, "log");
  if (!text.ok()) return "";
  std::string last;
  for (absl::string_view l : absl::StrSplit(*text, '\n', absl::SkipWhitespace())) {
    if (absl::StrContains(l, "FAILED")) return std::string(l);
    last = std::string(l);
  }
  return last;
}

struct Proc {
  std::string binary;
  std::vector<std::string> args, env;
  std::string cwd, log;
};

// Runs `p` to its end, its output in p.log. Cancelled when SIGINT/SIGTERM
// arrived (the child was stopped), DeadlineExceeded past `deadline`.
absl::StatusOr<int> RunToEnd(const Proc& p, const sigset_t& sigs, absl::Time deadline) {
  const int fd = open(p.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", p.log, ": ", strerror(errno)));
  launch::SpawnOptions so;
  so.binary = p.binary;
  so.args = p.args;
  so.env = p.env;
  so.cwd = p.cwd;
  so.stdout_fd = fd;
  so.stderr_fd = fd;
  absl::StatusOr<pid_t> pid = launch::Spawn(so);
  close(fd);
  if (!pid.ok()) return pid.status();
  absl::Status stopped;
  for (;;) {
    int st = 0;
    const pid_t w = waitpid(*pid, &st, WNOHANG);
    if (w < 0 && errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", strerror(errno)));
    if (w == *pid) {
      if (!stopped.ok()) return stopped;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    timespec ts{0, 200 * 1000 * 1000};
    siginfo_t info;
    const bool sig = sigtimedwait(&sigs, &info, &ts) > 0;
    if (stopped.ok() && (sig || absl::Now() > deadline)) {
      stopped = sig ? absl::CancelledError("interrupted")
                    : absl::DeadlineExceededError("still running at twice --time_budget");
      kill(*pid, SIGTERM);
      deadline = absl::Now() + absl::Seconds(20);
    } else if (!stopped.ok() && absl::Now() > deadline) {
      kill(*pid, SIGKILL);
    }
  }
}

// Each revision into OUT/src/SIDE: its commit resolved in --repo, a shared
// clone (git clone --shared: the repository's objects, nothing copied, the
// repository itself untouched) checked out at it, then --build in it.
absl::Status CheckOut(const gate::Plan& plan, const sigset_t& sigs) {
  absl::StatusOr<std::string> git = gate::ResolveProgram("git", "");
  if (!git.ok()) return absl::InvalidArgumentError("--base_rev/--head_rev need git in PATH");
  if (absl::Status m = MakeDirs(plan.out + "/src"); !m.ok()) return m;
  for (int s : {kBase, kHead}) {
    const gate::Side& side = plan.side[s];
    const std::string log = absl::StrCat(plan.out, "/src/", kSideName[s], "-checkout.log");
    Proc parse{*git, {"-C", plan.repo, "rev-parse", "--verify", "--quiet", side.rev + "^{commit}"},
               EnvWith({}), "", log};
    absl::StatusOr<int> rc = RunToEnd(parse, sigs, absl::Now() + absl::Minutes(1));
    if (!rc.ok()) return rc.status();
    const std::string commit = LastLine(log);
    if (*rc != 0 || commit.size() < 40) {
      return absl::InvalidArgumentError(absl::StrFormat("--%s_rev=%s: not a commit in %s",
                                                        kSideName[s], Echo(side.rev, 256), plan.repo));
    }
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"clone", "--quiet", "--shared", "--no-checkout", plan.repo, side.dir},
          std::vector<std::string>{"-C", side.dir, "checkout", "--quiet", "--detach", commit}}) {
      Proc p{*git, args, EnvWith({}), "", log};
      rc = RunToEnd(p, sigs, absl::Now() + absl::Minutes(5));
      if (!rc.ok()) return rc.status();
      if (*rc != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--%s_rev=%s: git %s failed: %s", kSideName[s], Echo(side.rev, 256), args[0] == "-C" ? "checkout" : "clone",
            LastLine(log)));
      }
    }
    if (plan.build.empty()) continue;
    fprintf(stderr, "gate: building %s (%s) in %s\n", kSideName[s], side.rev.c_str(), side.dir.c_str());
    Proc build{"/bin/sh", {"-c", plan.build}, EnvWith({}), side.dir,
               absl::StrCat(plan.out, "/src/", kSideName[s], "-build.log")};
    rc = RunToEnd(build, sigs, absl::Now() + plan.build_timeout);
    if (!rc.ok()) return rc.status();
    if (*rc != 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "--build failed for %s (%s), exit %d: %s (log %s)", kSideName[s], side.rev, *rc,
          LastLine(build.log), build.log));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CompareResult> Decide(const gate::Plan& plan, const CompareOptions& o) {
  absl::StatusOr<CompareSide> base = LoadCompareSide(plan.out + "/base");
  if (!base.ok()) return base.status();
  absl::StatusOr<CompareSide> head = LoadCompareSide(plan.out + "/head");
  if (!head.ok()) return head.status();
  return Compare(*base, *head, o);
}

// One line naming why two sides are not comparable; "" when they are.
std::string Refusal(const CompareResult& r) {
  for (const PairResult& p : r.pairs) {
    if (!p.fingerprint_mismatch.empty()) {
      return absl::StrFormat("%s; not comparable (--ignore_fingerprint=%s compares anyway)",
                             p.fingerprint_mismatch, absl::StrJoin(p.fingerprint_keys, ","));
    }
    if (!p.refused.empty() && !p.forced) {
      return absl::StrFormat("base and head are not comparable: %s", p.refused);
    }
  }
  return "";
}

std::string Describe(const gate::Side& s) {
  std::string d = s.command.empty() ? "the lab server (rsslab_server)" : s.command;
  if (!s.rev.empty()) absl::StrAppend(&d, " at ", s.rev);
  else if (!s.dir.empty()) absl::StrAppend(&d, " in ", s.dir);
  if (!s.env.empty()) absl::StrAppend(&d, " with ", absl::StrJoin(s.env, " "));
  if (!s.args.empty()) absl::StrAppend(&d, " ", absl::StrJoin(s.args, " "));
  return d;
}

struct Outcome {
  int code = 0;
  std::string stopped;
  absl::StatusOr<CompareResult> result = absl::UnknownError("no runs");
};

// One run of side `s`; an error names the side, the run and its log's last line.
absl::Status RunSide(const gate::Plan& plan, int s, int repeat, const sigset_t& sigs,
                     absl::Time deadline) {
  const absl::Time t0 = absl::Now();
  Proc p{SelfExe(), gate::ChildArgs(plan, s, repeat), EnvWith(plan.side[s].env), plan.side[s].dir,
         gate::RunDir(plan, s, repeat) + ".log"};
  absl::StatusOr<int> rc = RunToEnd(p, sigs, deadline);
  if (!rc.ok()) {
    return absl::Status(rc.status().code(),
                        absl::StrFormat("%s run %d: %s (log %s; the runs before it stay in %s)",
                                        kSideName[s], repeat, rc.status().message(), p.log, plan.out));
  }
  if (*rc != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s run %d failed (loadgen exit %d): %s (log %s; the runs so far stay in %s)",
        kSideName[s], repeat, *rc, LastLine(p.log), p.log, plan.out));
  }
  fprintf(stderr, "gate: %s run %d ok (%.1f s)\n", kSideName[s], repeat,
          absl::ToDoubleSeconds(absl::Now() - t0));
  return absl::OkStatus();
}

// Base, head, base, head, ... until the verdicts are clear, --max_repeats
// or --time_budget.
Outcome Interleave(const gate::Plan& plan, const CompareOptions& o, const sigset_t& sigs) {
  Outcome out;
  const absl::Time start = absl::Now();
  const absl::Time hard = start + 2 * plan.time_budget + absl::Minutes(1);
  for (int r = 1; r <= plan.max_repeats; ++r) {
    const absl::Time pair_start = absl::Now();
    for (int s : {kBase, kHead}) {
      if (absl::Status st = RunSide(plan, s, r, sigs, hard); !st.ok()) {
        out.code = absl::IsCancelled(st) ? kExitInterrupted : kExitUsage;
        out.result = st;
        return out;
      }
    }
    out.result = Decide(plan, o);
    if (!out.result.ok()) {
      out.code = kExitUsage;
      return out;
    }
    if (const std::string why = Refusal(*out.result); !why.empty()) {
      out.code = kExitUsage;
      out.result = absl::InvalidArgumentError(why);
      return out;
    }
    std::vector<std::string> why;
    const GateVerdict v = out.result->Gate(&why);
    fprintf(stderr, "gate: %d vs %d: %s\n", r, r, Echo(absl::StrJoin(why, "; "), 1024).c_str());
    const absl::Duration pair = absl::Now() - pair_start;
    if (r >= plan.min_repeats && v != GateVerdict::kCantTell) {
      out.stopped = "every gated figure's verdict is clear";
      break;
    }
    if (r == plan.max_repeats) out.stopped = absl::StrFormat("--max_repeats=%d", r);
    else if (absl::Now() + pair - start > plan.time_budget) {
      out.stopped = absl::StrFormat("--time_budget=%s (another pair would pass it)",
                                    absl::FormatDuration(plan.time_budget));
      break;
    }
  }
  return out;
}

int Finish(const gate::Plan& plan, Outcome& out, absl::Time start) {
  const CompareResult& r = *out.result;
  const std::string text = CompareText(r);
  fwrite(text.data(), 1, text.size(), stdout);
  std::vector<std::string> why;
  const GateVerdict v = r.Gate(&why);
  const int code = v == GateVerdict::kRegression ? kExitRegression
                   : v == GateVerdict::kCantTell ? kExitCantTell
                                                 : 0;
  const char* word = v == GateVerdict::kRegression ? "regression"
                     : v == GateVerdict::kCantTell ? "can't tell"
                                                   : "pass";
  printf("gate: %s (stopped: %s; runs in %s)\n", word, out.stopped.c_str(), plan.out.c_str());
  fflush(stdout);
  if (!plan.report_md.empty()) {
    gate::ReportInfo info{word, Describe(plan.side[kBase]), Describe(plan.side[kHead]), out.stopped,
                          plan.out, absl::ToDoubleSeconds(absl::Now() - start), code, ""};
    // compare's PNG too (matplotlib): --plot, or beside the report.
    std::string png = absl::GetFlag(FLAGS_plot);
    if (png.empty()) {
      png = plan.report_md.substr(0, plan.report_md.rfind('.') > plan.report_md.rfind('/')
                                         ? plan.report_md.rfind('.')
                                         : std::string::npos) + ".png";
    }
    if (PlotCompare(r, png)) info.png = png;
    if (absl::Status w = WriteFileAtomically(plan.report_md, gate::GateMarkdown(r, info)); !w.ok()) {
      return Fail(kExitUsage, absl::StrCat("--report_md: ", w.message()));
    }
  }
  return code;
}

}  // namespace

int GateMain(int argc, char** argv, const sigset_t& sigs) {
  const absl::Time start = absl::Now();
  absl::StatusOr<gate::Plan> plan =
      gate::PlanFromArgs(std::vector<std::string>(argv, argv + argc), FlagsGiven());
  if (!plan.ok()) return Fail(kExitUsage, plan.status().message());
  absl::StatusOr<CompareOptions> o = VerdictOptions();
  if (!o.ok()) return Fail(kExitUsage, o.status().message());
  for (int s : {kBase, kHead}) {
    const std::string dir = absl::StrCat(plan->out, "/", kSideName[s]);
    if (access(dir.c_str(), F_OK) == 0) {
      return Fail(kExitUsage, absl::StrCat("--out=", plan->out, " already holds runs (", dir,
                                           "); a gate never writes over another's"));
    }
    if (absl::Status m = MakeDirs(dir); !m.ok()) return Fail(kExitUsage, m.message());
  }
  if (!plan->side[kBase].rev.empty()) {
    absl::Status c = CheckOut(*plan, sigs);
    if (!c.ok()) return Fail(absl::IsCancelled(c) ? kExitInterrupted : kExitUsage, c.message());
  }
  for (int s : {kBase, kHead}) {
    if (absl::Status c = gate::ResolveCommand(&plan->side[s]); !c.ok()) {
      return Fail(kExitUsage, absl::StrCat(kSideName[s], ": ", c.message()));
    }
  }
  fprintf(stderr, "gate: base %s\ngate: head %s\ngate: runs in %s, interleaved, %d to %d a side, %s budget\n",
          Describe(plan->side[kBase]).c_str(), Describe(plan->side[kHead]).c_str(), plan->out.c_str(),
          plan->min_repeats, plan->max_repeats, absl::FormatDuration(plan->time_budget).c_str());
  Outcome out = Interleave(*plan, *o, sigs);
  if (!out.result.ok()) return Fail(out.code, out.result.status().message());
  return Finish(*plan, out, start);
}

}  // namespace rsslab
