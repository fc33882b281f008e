#include "loadgen/gate/gate.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/commands.h"
#include "common/untrusted_text.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace gate {
namespace {

// The gate's flags, and compare's that decide its verdicts.
constexpr const char* kGateFlags[] = {
    "service",    "base_command", "head_command", "base_dir",    "head_dir",    "base_rev",
    "head_rev",   "build",        "build_timeout", "repo",       "base_env",    "head_env",
    "base_args",  "head_args",    "ready",        "out",         "report_md",   "min_repeats",
    "max_repeats", "time_budget", "gate",         "floor_mib",   "floor_pct",   "alpha",
    "ignore_fingerprint", "plot"};

// Run flags the gate sets for every run (or that would take a run
// elsewhere): given by the user they are a usage error.
constexpr const char* kOwnedRunFlags[] = {
    "local",        "agent",          "agents_file",       "repeats",
    "resume",       "cells",          "results_dir",       "cell_index_env",
    "command",      "allow_command",  "allow_command_args", "allow_command_ready",
    "allow_command_ready_port", "allow_command_control", "print_cells", "print_builtin"};

std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

// "--name=value" or "--name" -> name (one or two leading dashes); "" when
// `arg` is no flag.
std::string FlagName(const std::string& arg) {
  absl::string_view a = arg;
  if (!absl::ConsumePrefix(&a, "--") && !absl::ConsumePrefix(&a, "-")) return "";
  return std::string(a.substr(0, a.find('=')));
}

bool Owned(const std::string& name) {
  for (const char* f : kOwnedRunFlags) {
    if (name == f) return true;
  }
  return false;
}

absl::Status CheckOwned(const std::string& name, absl::string_view where) {
  if (!Owned(name)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s--%s: the gate sets it for each run (every run is a fresh --local process; "
      "--out names the gate's directory)",
      where, name));
}

// "NAME=value,NAME=value" -> each; names [A-Za-z_][A-Za-z0-9_]*.
absl::StatusOr<std::vector<std::string>> ParseEnv(const std::string& flag, const std::string& v) {
  std::vector<std::string> out;
  for (absl::string_view kv : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    const size_t eq = kv.find('=');
    absl::string_view name = kv.substr(0, eq);
    bool ok = eq != absl::string_view::npos && !name.empty() && !absl::ascii_isdigit(name[0]);
    for (char c : name) ok = ok && (absl::ascii_isalnum(c) || c == '_');
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s: \"%s\" is not NAME=value (e.g. --%s=MALLOC_ARENA_MAX=2)", flag, Echo(kv, 128), flag));
    }
    if (out.size() >= kMaxEnv) {
      return absl::InvalidArgumentError(absl::StrFormat("--%s: more than %d variables", flag, kMaxEnv));
    }
    if (kv.size() > kMaxArgBytes) {
      return absl::InvalidArgumentError(absl::StrFormat("--%s: a variable over %d bytes", flag, kMaxArgBytes));
    }
    out.push_back(std::string(kv));
  }
  return out;
}

// --base_args / --head_args: loadgen flags in the template quoting.
absl::StatusOr<std::vector<std::string>> ParseArgs(const std::string& flag, const std::string& v) {
  absl::StatusOr<std::vector<commands::TemplateWord>> words = commands::SplitTemplate(v);
  if (!words.ok()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", words.status().message()));
  std::vector<std::string> out;
  for (const commands::TemplateWord& w : *words) {
    std::string s;
    for (const auto& p : w.parts) s += p.text;
    const std::string name = FlagName(s);
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s: \"%s\" is not a flag (--NAME=value)", flag, Echo(s, 128)));
    }
    if (absl::Status o = CheckOwned(name, absl::StrCat("--", flag, ": ")); !o.ok()) return o;
    out.push_back(s);
  }
  return out;
}

bool Has(const std::vector<std::string>& args, absl::string_view name) {
  for (const std::string& a : args) {
    if (FlagName(a) == name) return true;
  }
  return false;
}

// The flags that are not the gate's, in order; the word "gate" dropped.
absl::StatusOr<std::vector<std::string>> PassThrough(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  bool seen_gate = false;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.size() > kMaxArgBytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "argument %d is longer than %d bytes", static_cast<int>(i), kMaxArgBytes));
    }
    const std::string name = FlagName(a);
    if (name.empty()) {
      if (a == "gate" && !seen_gate) {
        seen_gate = true;
        continue;
      }
      return absl::InvalidArgumentError(
          absl::StrFormat("gate: unexpected argument \"%s\" (flags only, each as --NAME=value)", Echo(a, 128)));
    }
    if (IsGateFlag(name)) {
      if (a.find('=') == std::string::npos) ++i;  // --name value
      continue;
    }
    if (absl::Status o = CheckOwned(name, ""); !o.ok()) return o;
    out.push_back(a);
  }
  return out;
}

// One side's command, directory, environment and flags.
absl::Status MakeSide(const Flags& f, int s, const std::string& out, Side* side) {
  const bool base = s == kBase;
  const std::string& cmd = base ? f.base_command : f.head_command;
  side->command = cmd.empty() ? f.service : cmd;
  const std::string& dir = base ? f.base_dir : f.head_dir;
  side->rev = base ? f.base_rev : f.head_rev;
  if (!side->rev.empty()) {
    if (!dir.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s_dir and --%s_rev: give one (a revision is checked out into OUT/src/%s)",
          kSideName[s], kSideName[s], kSideName[s]));
    }
    side->dir = absl::StrCat(out, "/src/", kSideName[s]);
  } else if (!dir.empty()) {
    side->dir = Absolute(dir);
    struct stat st;
    if (stat(side->dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s_dir=%s: not a directory", kSideName[s], Echo(dir, 256)));
    }
  }
  absl::StatusOr<std::vector<std::string>> env =
      ParseEnv(absl::StrCat(kSideName[s], "_env"), base ? f.base_env : f.head_env);
  if (!env.ok()) return env.status();
  side->env = *env;
  if (side->command.empty()) {
    // The lab server's launch takes its allocator setup from the profile
    // only: such a variable would be dropped without a word.
    std::map<std::string, std::string> named;
    for (const std::string& kv : side->env) named[kv.substr(0, kv.find('='))] = "";
    const auto alloc = procfs::AllocatorEnv(named);
    if (!alloc.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s_env=%s: the lab server takes its allocator setup from its profile (e.g. "
          "--%s_args=--profiles=glibc-arena2), not from the environment",
          kSideName[s], alloc.begin()->first, kSideName[s]));
    }
  }
  absl::StatusOr<std::vector<std::string>> args =
      ParseArgs(absl::StrCat(kSideName[s], "_args"), base ? f.base_args : f.head_args);
  if (!args.ok()) return args.status();
  side->args = *args;
  return absl::OkStatus();
}

// Which sides the flags name, checked in pairs.
absl::Status CheckPairs(const Flags& f) {
  const struct {
    const char* what;
    const std::string& base;
    const std::string& head;
  } pairs[] = {{"dir", f.base_dir, f.head_dir}, {"rev", f.base_rev, f.head_rev}};
  for (const auto& p : pairs) {
    if (p.base.empty() != p.head.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s_%s without --%s_%s: give both sides", p.base.empty() ? "head" : "base", p.what,
          p.base.empty() ? "base" : "head", p.what));
    }
  }
  if (!f.base_rev.empty() && f.repo.empty() && access(".git", F_OK) != 0) {
    return absl::InvalidArgumentError("--base_rev/--head_rev: run in a git checkout or pass --repo=DIR");
  }
  if (f.base_rev.empty() && !f.build.empty()) {
    return absl::InvalidArgumentError("--build builds a checked-out revision: give --base_rev and --head_rev");
  }
  const bool base_cmd = !f.base_command.empty() || !f.service.empty();
  const bool head_cmd = !f.head_command.empty() || !f.service.empty();
  if (base_cmd != head_cmd) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--%s_command without a command for %s: give --%s_command, or --service for both",
        base_cmd ? "base" : "head", base_cmd ? "head" : "base", base_cmd ? "head" : "base"));
  }
  if (f.min_repeats < 2 || f.min_repeats > kMaxRepeats || f.max_repeats < 2 ||
      f.max_repeats > kMaxRepeats) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--min_repeats=%d, --max_repeats=%d: use 2 to %d runs a side", f.min_repeats,
        f.max_repeats, kMaxRepeats));
  }
  if (f.time_budget <= absl::ZeroDuration() || f.time_budget > absl::Hours(24) ||
      f.build_timeout <= absl::ZeroDuration() || f.build_timeout > absl::Hours(4)) {
    return absl::InvalidArgumentError(
        "--time_budget (up to 24h) and --build_timeout (up to 4h) must be positive durations");
  }
  return absl::OkStatus();
}

std::string DefaultOut() {
  char buf[64];
  const time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  strftime(buf, sizeof(buf), "results/gate-%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

bool IsGateFlag(const std::string& name) {
  for (const char* f : kGateFlags) {
    if (name == f) return true;
  }
  return false;
}

absl::StatusOr<std::string> ResolveProgram(const std::string& word, const std::string& dir) {
  std::vector<std::string> candidates;
  if (word.find('/') != std::string::npos) {
    candidates.push_back(word[0] == '/' || dir.empty() ? Absolute(word) : absl::StrCat(dir, "/", word));
  } else {
    const char* path = getenv("PATH");
    for (absl::string_view d : absl::StrSplit(path ? path : "/usr/bin:/bin", ':', absl::SkipEmpty())) {
      candidates.push_back(absl::StrCat(d, "/", word));
    }
  }
  for (const std::string& c : candidates) {
    struct stat st;
    if (stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(c.c_str(), X_OK) == 0) {
      return Absolute(c);
    }
  }
  return absl::NotFoundError(absl::StrFormat(
      "%s is not an executable file%s", Echo(word, 256),
      word.find('/') != std::string::npos ? (dir.empty() ? "" : absl::StrCat(" in ", Echo(dir, 256)))
                                          : " in PATH"));
}

absl::StatusOr<Plan> PlanFromArgs(const std::vector<std::string>& argv, const Flags& f) {
  if (absl::Status s = CheckPairs(f); !s.ok()) return s;
  for (const std::string* v : {&f.service, &f.base_command, &f.head_command, &f.build, &f.ready}) {
    if (v->size() > kMaxArgBytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("a command or --ready is longer than %d bytes", kMaxArgBytes));
    }
  }
  Plan p;
  absl::StatusOr<std::vector<std::string>> pass = PassThrough(argv);
  if (!pass.ok()) return pass.status();
  p.passthrough = *pass;
  p.out = Absolute(f.out.empty() ? DefaultOut() : f.out);
  p.ready = f.ready;
  p.build = f.build;
  p.repo = Absolute(f.repo.empty() ? "." : f.repo);
  p.report_md = Absolute(f.report_md);
  p.min_repeats = f.min_repeats;
  p.max_repeats = f.max_repeats;
  p.time_budget = f.time_budget;
  p.build_timeout = f.build_timeout;
  if (p.min_repeats > p.max_repeats) p.min_repeats = p.max_repeats;
  for (int s : {kBase, kHead}) {
    if (absl::Status m = MakeSide(f, s, p.out, &p.side[s]); !m.ok()) return m;
  }
  if (!Has(p.passthrough, "scenario") && !Has(p.passthrough, "builtin")) {
    p.passthrough.push_back("--builtin=sweep");
  }
  if (!Has(p.passthrough, "profiles")) p.passthrough.push_back("--profiles=glibc");
  if (!Has(p.passthrough, "threads_list")) p.passthrough.push_back("--threads_list=4");
  return p;
}

absl::Status ResolveCommand(Side* side) {
  if (side->command.empty()) return absl::OkStatus();
  absl::string_view c = absl::StripLeadingAsciiWhitespace(side->command);
  const size_t end = c.find_first_of(" \t");
  const std::string word(c.substr(0, end));
  if (word.find_first_of("'\"\\") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: its executable is written without quotes (the arguments may have them)", Echo(word, 256)));
  }
  absl::StatusOr<std::string> prog = ResolveProgram(word, side->dir);
  if (!prog.ok()) return absl::InvalidArgumentError(prog.status().message());
  side->program = *prog;
  side->template_args =
      end == absl::string_view::npos ? "" : std::string(absl::StripAsciiWhitespace(c.substr(end)));
  return absl::OkStatus();
}

std::string RunDir(const Plan& plan, int side, int repeat) {
  return absl::StrFormat("%s/%s/run-%02d", plan.out, kSideName[side], repeat);
}

std::vector<std::string> ChildArgs(const Plan& plan, int s, int repeat) {
  std::vector<std::string> a = plan.passthrough;
  a.push_back("--local");
  a.push_back("--repeats=1");
  a.push_back("--out=" + RunDir(plan, s, repeat));
  const Side& side = plan.side[s];
  if (!side.command.empty() && !side.env.empty()) {
    // Through env(1): a launch takes the allocator's variables from the
    // profile only, so NAME=value reaches the service as its start
    // environment this way (and its fingerprint shows it).
    std::vector<std::string> words = side.env;
    words.push_back(side.program);
    a.push_back("--command=service");
    a.push_back("--allow_command=service=/usr/bin/env");
    a.push_back(absl::StrCat("--allow_command_args=service=", commands::JoinQuoted(words), " ",
                             side.template_args));
    if (!plan.ready.empty()) a.push_back("--allow_command_ready=service=" + plan.ready);
  } else if (!side.command.empty()) {
    a.push_back("--command=service");
    a.push_back("--allow_command=service=" + side.program);
    a.push_back("--allow_command_args=service=" + side.template_args);
    if (!plan.ready.empty()) a.push_back("--allow_command_ready=service=" + plan.ready);
  }
  a.insert(a.end(), side.args.begin(), side.args.end());
  return a;
}

}  // namespace gate
}  // namespace rsslab
