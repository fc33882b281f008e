// rsslab_run: start one rsslab_server under an allocator profile, verify the
// profile took effect, then stay in front of it (forwarding signals) until it
// exits. The user-facing form is `./rsslab serve --profile=NAME [flags]`.
//
//   rsslab_run --profile=jemalloc-bg [--profile_file=FILE[,FILE]]
//       [--server_binary=PATH] [--ready_timeout_s=60] [--] [server flags...]
//   rsslab_run --list_profiles [--profile_file=FILE]
//   rsslab_run --profile=NAME --print_env          # the environment a launch gives
//   rsslab_run --profile=NAME --verify_pid=PID     # /proc/PID checked against it
//   rsslab_run --profile=NAME --command=NAME --allow_command=NAME=PATH
//       [--allow_command_args=...] [--allow_command_ready=...] [--threads=4]
//       [--stop_grace_ms=5000] [--ok_exit_codes=0]  # one's own program, once
//
// Every argument rsslab_run does not know goes to the server, so
// `--threads=16 --cache_limit_mb=200` just work; each is checked against the
// server's flag table (common/server_flags.h) first, as the operator's. The server's ready line is
// printed on stdout only after verification, so scripts that wait for
// "rsslab_server ready" never talk to an unverified server. On failure the
// server is killed and rsslab_run exits 2 naming what is missing.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/command_flags.h"
#include "agent/commands.h"
#include "agent/exit_text.h"
#include "agent/launch.h"
#include "agent/profiles.h"
#include "agent/stop_outcome.h"
#include "common/pid.h"
#include "common/server_flags.h"
#include "common/shipped.h"

namespace rsslab {
namespace {

constexpr char kUsage[] =
    "usage: rsslab_run --profile=NAME [--profile_file=FILE[,FILE]] [--server_binary=PATH]\n"
    "                  [--ready_timeout_s=60] [--] [server flags...]\n"
    "       rsslab_run --list_profiles [--profile_file=FILE[,FILE]]\n"
    "       rsslab_run --profile=NAME [--profile_file=FILE[,FILE]] --print_env | --verify_pid=PID\n"
    "       rsslab_run --profile=NAME --command=NAME --allow_command=NAME=PATH\n"
    "                  [--allow_command_args=NAME=TEMPLATE] [--allow_command_ready=NAME=REGEX]\n"
    "                  [--allow_command_ready_port=NAME={port}] [--allow_command_control=...]\n"
    "                  [--threads=4] [--stop_grace_ms=5000] [--ok_exit_codes=0]\n"
    "Starts rsslab_server with the profile's LD_PRELOAD and environment, waits for\n"
    "its ready line, verifies /proc/PID/maps and /proc/PID/environ (and the\n"
    "allocator the server reports), then forwards SIGINT/SIGTERM to it until it\n"
    "exits. Unknown arguments are passed to the server.\n"
    "--print_env writes the environment the profile's launch gives a program\n"
    "(this one's with the profile applied), each NAME=VALUE ending in a NUL byte,\n"
    "and starts nothing; --verify_pid checks a running process's /proc/PID/maps\n"
    "and environ against the profile as a launch does (exit 0, or 2 naming what\n"
    "is missing), for a program started by other means with that environment.\n"
    "--command runs one's own program (the agent's --allow_command flags) once under\n"
    "the profile, verifies /proc/PID, prints `rsslab_run ready command=NAME pid=PID\n"
    "data=... control=...`, and on SIGINT/SIGTERM stops it (SIGTERM, SIGKILL after\n"
    "--stop_grace_ms; a second signal kills at once). Exit 0: stopped normally\n"
    "(SIGTERM's death or an --ok_exit_codes code); 1: stopped, not normally; 2: did\n"
    "not start or verify; 3: it ended by itself before any stop; 64: usage.\n";

constexpr int kExitUsage = 64;
// --command: SIGTERM, then SIGKILL this long after.
constexpr int kDefaultStopGraceMs = 5000;

[[noreturn]] void Fail(int code, const std::string& msg) {
  fprintf(stderr, "rsslab_run: %s\n", msg.c_str());
  exit(code);
}

struct RunArgs {
  std::string profile_name;
  std::string profiles_path;
  std::string old_profiles_path;  // --profiles, the deprecated spelling
  std::string server_binary;
  bool list = false;
  bool print_env = false;
  int verify_pid = 0;
  int ready_timeout_s = 60;
  std::vector<std::string> server_args;
  // --command: one's own program (the --allow_command flags, read from argv).
  std::string command;
  int threads = 4;
  int stop_grace_ms = kDefaultStopGraceMs;
  std::string ok_exit_codes = launch::kDefaultOkExitCodes;
};

// Whether `a` is one of the --allow_command* flags (commands::FromFlags reads
// them from argv); *takes_next: its value is the next argument.
bool IsCommandFlag(const std::string& a, bool* takes_next) {
  for (const char* f : {"allow_command", "allow_command_args", "allow_command_ready",
                        "allow_command_ready_port", "allow_command_control"}) {
    for (const char* dashes : {"--", "-"}) {
      const std::string flag = absl::StrCat(dashes, f);
      if (a == flag) {
        *takes_next = true;
        return true;
      }
      if (absl::StartsWith(a, flag + "=")) {
        *takes_next = false;
        return true;
      }
    }
  }
  return false;
}

int IntFlag(const std::string& flag, const std::string& text, int lo, int hi) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    Fail(kExitUsage, absl::StrCat("--", flag, " must be an integer between ", lo, " and ", hi));
  }
  return v;
}

// rsslab_run's own flags; the rest goes to the server. Exits on --help and
// on usage errors.
RunArgs ParseArgs(int argc, char** argv) {
  RunArgs r;
  bool pass_rest = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag, std::string* out) {
      std::string eq = absl::StrCat("--", flag, "=");
      if (absl::StartsWith(a, eq)) {
        *out = a.substr(eq.size());
        return true;
      }
      if (a != absl::StrCat("--", flag)) return false;
      if (i + 1 >= argc) Fail(kExitUsage, absl::StrCat("--", flag, " needs a value\n", kUsage));
      *out = argv[++i];
      return true;
    };
    std::string timeout_s, pid, number;
    bool takes_next = false;
    if (pass_rest) {
      r.server_args.push_back(a);
    } else if (a == "--") {
      pass_rest = true;
    } else if (a == "-h" || a == "--help" || a == "-help") {
      fputs(kUsage, stdout);
      exit(0);
    } else if (a == "--list_profiles") {
      r.list = true;
    } else if (a == "--print_env") {
      r.print_env = true;
    } else if (value("verify_pid", &pid)) {
      absl::StatusOr<int> parsed = ParsePid(pid, "--verify_pid");
      if (!parsed.ok()) Fail(kExitUsage, std::string(parsed.status().message()));
      r.verify_pid = *parsed;
    } else if (IsCommandFlag(a, &takes_next)) {
      if (takes_next) ++i;  // FromFlags reads it
    } else if (value("profile", &r.profile_name) || value("profile_file", &r.profiles_path) ||
               value("profiles", &r.old_profiles_path) ||
               value("server_binary", &r.server_binary) || value("command", &r.command) ||
               value("ok_exit_codes", &r.ok_exit_codes)) {
    } else if (value("stop_grace_ms", &number)) {
      r.stop_grace_ms = IntFlag("stop_grace_ms", number, 0, 600000);
    } else if (value("ready_timeout_s", &timeout_s)) {
      if (!absl::SimpleAtoi(timeout_s, &r.ready_timeout_s) || r.ready_timeout_s <= 0 ||
          r.ready_timeout_s > 3600) {
        Fail(kExitUsage, "--ready_timeout_s must be an integer between 1 and 3600");
      }
    } else {
      r.server_args.push_back(a);
    }
  }
  std::string note;
  absl::StatusOr<std::string> file =
      profiles::ProfileFileFlag(r.profiles_path, r.old_profiles_path, &note);
  if (!file.ok()) Fail(kExitUsage, std::string(file.status().message()));
  if (!note.empty()) fprintf(stderr, "rsslab_run: %s\n", note.c_str());
  r.profiles_path = *file;
  if (r.command.empty() && (r.stop_grace_ms != kDefaultStopGraceMs ||
                            r.ok_exit_codes != launch::kDefaultOkExitCodes)) {
    Fail(kExitUsage, "--stop_grace_ms and --ok_exit_codes are --command's (a server is stopped by "
                     "its own --shutdown_grace_ms)");
  }
  if (r.command.empty() && commands::AnyFlagGiven(argc, argv)) {
    Fail(kExitUsage, "the --allow_command* flags describe the program --command=NAME runs; "
                     "give --command");
  }
  if (!r.command.empty()) {
    // The template is the program's only source of arguments; --threads
    // fills its {threads}.
    for (const std::string& a : r.server_args) {
      if (absl::StartsWith(a, "--threads=")) {
        r.threads = IntFlag("threads", a.substr(10), 1, 1024);
      } else {
        Fail(kExitUsage, absl::StrCat("--command=", r.command, ": '", a.substr(0, 64),
                                      "' is not an rsslab_run flag (a command's arguments come "
                                      "from its --allow_command_args template only)"));
      }
    }
    r.server_args.clear();
  }
  return r;
}

// Forwards stop signals until the server has exited; its exit code.
int ForwardUntilExit(const sigset_t& sigs, launch::Started& s) {
  auto* child = static_cast<launch::OwnChild*>(s.child.get());
  while (true) {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig != SIGCHLD) {
      child->Signal(sig == SIGHUP ? SIGTERM : sig);
      continue;
    }
    // SIGCHLD can come before the waiter has reaped it, or for a stop.
    if (!child->AwaitExit(absl::Seconds(1))) continue;
    s.pump->WaitEof(absl::Seconds(5));
    const int st = child->wait_status();
    fprintf(stderr, "rsslab_run: server %s\n", launch::DescribeExit(st).c_str());
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  }
}

// "rsslab_run: profile 'X' verified in pid N: allocator=... mapped=... env ..." on stderr.
void PrintVerification(const v1::Profile& profile, int pid, const profiles::Verification& v) {
  std::vector<std::string> env;
  for (const auto& kv : v.env) env.push_back(absl::StrCat(kv.first, "=", kv.second));
  fprintf(stderr, "rsslab_run: profile '%s' verified in pid %d: allocator=%s%s%s%s%s\n",
          profile.name().c_str(), pid, v.allocator.c_str(),
          v.mapped_library.empty() ? "" : " mapped=", v.mapped_library.c_str(),
          env.empty() ? "" : " env ", absl::StrJoin(env, " ").c_str());
}

void PrintVerified(const v1::Profile& profile, const launch::Started& s) {
  PrintVerification(profile, s.pid, s.verified.verification);
  // Only now, so whoever waits for it never meets an unverified server.
  printf("%s\n", s.ready_line.c_str());
  fflush(stdout);
}

// The launch: the operator's server flags checked against the server's
// table, the server's stdout forwarded to ours with the ready line held back
// until verified.
launch::LaunchOptions Options(const RunArgs& args, const v1::Profile& profile) {
  launch::LaunchOptions o;
  o.program = args.server_binary;
  o.profile = &profile;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> flags =
      ParseServerArgs(args.server_args, FlagSource::kOperator);
  if (!flags.ok()) Fail(kExitUsage, std::string(flags.status().message()));
  o.flags = *std::move(flags);
  o.flag_check = launch::LaunchOptions::FlagCheck::kOperator;
  o.output = launch::Output::kPipe;
  o.forward_stdout_fd = 1;
  o.ready_timeout = absl::Seconds(args.ready_timeout_s);
  o.parent_death_signal = SIGTERM;  // forked from the main thread: see SpawnOptions
  return o;
}

// --print_env and --verify_pid: the profile's two halves of a launch, for a
// program the caller starts itself (tools/truth's plain-Python reference).
int ProfileOnly(const RunArgs& args, const v1::Profile& profile) {
  if (!args.server_args.empty()) {
    Fail(kExitUsage, absl::StrCat("--print_env and --verify_pid start no server; unexpected ",
                                  args.server_args.front()));
  }
  if (args.print_env) {
    for (const std::string& kv :
         profiles::EnvStrings(profiles::BuildLaunchEnv(profile, profiles::CurrentEnviron()))) {
      fwrite(kv.c_str(), 1, kv.size() + 1, stdout);  // with its NUL
    }
    return fflush(stdout) == 0 ? 0 : 1;
  }
  absl::StatusOr<profiles::Verification> v = profiles::VerifyProfile(args.verify_pid, profile);
  if (!v.ok()) {
    Fail(2, absl::StrCat("FAILED: ", v.status().message()));  // names the profile and pid
  }
  PrintVerification(profile, args.verify_pid, *v);
  return 0;
}

// --command: one's own program, the agent's launch rules (commands.h), a
// pipe for its stdout (copied to ours, its ready line held back until
// verified), stderr inherited.
struct CommandLaunch {
  launch::LaunchOptions options;
  commands::Values values;
  const commands::Command* command = nullptr;
  std::map<std::string, commands::Command> all;
};

void PrepareCommand(const RunArgs& args, const v1::Profile& profile, int argc, char** argv,
                    CommandLaunch* cl) {
  absl::StatusOr<std::map<std::string, commands::Command>> cmds = commands::FromFlags(argc, argv);
  if (!cmds.ok()) Fail(kExitUsage, std::string(cmds.status().message()));
  cl->all = *std::move(cmds);
  absl::StatusOr<const commands::Command*> c = commands::Lookup(cl->all, args.command, "rsslab_run");
  if (!c.ok()) Fail(kExitUsage, std::string(c.status().message()));
  cl->command = *c;
  launch::LaunchOptions& o = cl->options;
  if (absl::Status s = commands::Configure(**c, "127.0.0.1", args.threads, &o, &cl->values); !s.ok()) {
    Fail(2, absl::StrCat("FAILED: ", s.message()));
  }
  o.profile = &profile;
  o.name = absl::StrCat("command ", args.command);
  o.output = launch::Output::kPipe;
  o.forward_stdout_fd = 1;
  o.ready_timeout = absl::Seconds(args.ready_timeout_s);
  o.parent_death_signal = SIGTERM;  // forked from the main thread: see SpawnOptions
}

// Until the program ends: the first SIGINT/SIGTERM/SIGHUP sends it SIGTERM,
// SIGKILL follows after the grace period (or at a second signal). The exit
// status says how it ended (kUsage's list).
int StopOnSignal(const RunArgs& args, const sigset_t& sigs, launch::Started& s,
                 const std::vector<int>& ok_codes) {
  auto* child = static_cast<launch::OwnChild*>(s.child.get());
  bool stop_sent = false;
  absl::Time kill_at = absl::InfiniteFuture();
  while (true) {
    int sig = 0;
    if (stop_sent) {
      const absl::Duration left = std::max(kill_at - absl::Now(), absl::ZeroDuration());
      const timespec ts = absl::ToTimespec(left);
      sig = sigtimedwait(&sigs, nullptr, &ts);
      if (sig < 0) {
        if (errno != EAGAIN) continue;  // EINTR
        fprintf(stderr, "rsslab_run: command %s (pid %d) still running %d ms after SIGTERM: SIGKILL\n",
                args.command.c_str(), s.pid, args.stop_grace_ms);
        child->Signal(SIGKILL);
        kill_at = absl::InfiniteFuture();
        continue;
      }
    } else {
      sigwait(&sigs, &sig);
    }
    if (sig != SIGCHLD) {
      fprintf(stderr, "rsslab_run: %s: %s command %s (pid %d)\n", sigabbrev_np(sig),
              stop_sent ? "killing" : "stopping", args.command.c_str(), s.pid);
      child->Signal(stop_sent ? SIGKILL : SIGTERM);
      if (!stop_sent) kill_at = absl::Now() + absl::Milliseconds(args.stop_grace_ms);
      stop_sent = true;
      continue;
    }
    if (!child->AwaitExit(absl::Seconds(1))) continue;
    s.pump->WaitEof(absl::Seconds(5));
    const int st = child->wait_status();
    const launch::StopVerdict v = launch::JudgeStop(
        {!stop_sent, WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0},
        ok_codes);
    const std::string how = launch::DescribeExit(st);
    switch (v.ending) {
      case launch::Ending::kNormalStop:
        fprintf(stderr, "rsslab_run: command %s (pid %d) stopped: %s, a normal stop\n",
                args.command.c_str(), s.pid, how.c_str());
        return 0;
      case launch::Ending::kBadStop:
        fprintf(stderr, "rsslab_run: command %s (pid %d) stopped, not normally: %s\n",
                args.command.c_str(), s.pid, v.why.c_str());
        return 1;
      case launch::Ending::kDiedBeforeStop:
        fprintf(stderr, "rsslab_run: command %s (pid %d) ended by itself before any stop: %s\n",
                args.command.c_str(), s.pid, how.c_str());
        return 3;
    }
  }
}

int RunCommand(const RunArgs& args, const v1::Profile& profile, int argc, char** argv) {
  absl::StatusOr<std::vector<int>> ok_codes = launch::ParseOkExitCodes(args.ok_exit_codes);
  if (!ok_codes.ok()) Fail(kExitUsage, std::string(ok_codes.status().message()));
  CommandLaunch cl;
  PrepareCommand(args, profile, argc, argv, &cl);
  sigset_t sigs;  // blocked before any thread exists: see Main
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  fprintf(stderr, "rsslab_run: starting command %s (%s) under profile '%s'\n",
          args.command.c_str(), cl.command->path.c_str(), profile.name().c_str());
  absl::StatusOr<launch::Started> started = launch::StartVerifiedServer(cl.options);
  if (!started.ok()) Fail(2, absl::StrCat("FAILED: ", started.status().message()));
  std::string data, control;
  absl::Status a = commands::AddressesOrStop(*cl.command, cl.values, *started, &data, &control);
  if (!a.ok()) Fail(2, absl::StrCat("FAILED: ", a.message()));
  PrintVerification(profile, started->pid, started->verified.verification);
  if (!started->ready_line.empty()) printf("%s\n", started->ready_line.c_str());
  printf("rsslab_run ready command=%s pid=%d data=%s control=%s profile=%s\n",
         args.command.c_str(), started->pid, data.c_str(), control.empty() ? "-" : control.c_str(),
         profile.name().c_str());
  fflush(stdout);
  return StopOnSignal(args, sigs, *started, *ok_codes);
}

const v1::Profile& ChooseProfile(const RunArgs& args, const v1::ProfileSet& set) {
  if (args.profile_name.empty()) Fail(kExitUsage, absl::StrCat("--profile=NAME is required\n", kUsage));
  const v1::Profile* profile = profiles::FindProfile(set, args.profile_name);
  if (profile == nullptr) {
    Fail(2, absl::StrCat("unknown profile '", args.profile_name, "' (", args.profiles_path,
                         " has: ", profiles::ProfileNames(set), ")"));
  }
  if (!profile->unavailable().empty()) {
    Fail(2, absl::StrCat("profile '", args.profile_name, "' is unavailable here: ",
                         profile->unavailable()));
  }
  return *profile;
}

int Main(int argc, char** argv) {
  RunArgs args = ParseArgs(argc, argv);
  if (args.profiles_path.empty()) args.profiles_path = FindShipped("agent/profiles.textproto");
  if (args.profiles_path.empty()) Fail(kExitUsage, "cannot find agent/profiles.textproto; pass --profile_file=FILE");
  absl::StatusOr<v1::ProfileSet> set = profiles::LoadProfiles(args.profiles_path);
  if (!set.ok()) Fail(2, std::string(set.status().message()));
  if (args.list) {
    // An unavailable profile's second column is "UNAVAILABLE:" (scripts
    // that want what can run here skip those lines: tools/sweep.sh).
    // The name column is as wide as the longest name, so columns line up.
    int width = 0;
    for (const auto& p : set->profile()) width = std::max(width, static_cast<int>(p.name().size()));
    for (const auto& p : set->profile()) {
      if (p.unavailable().empty()) {
        printf("%-*s %s\n", width, p.name().c_str(), p.description().c_str());
      } else {
        printf("%-*s UNAVAILABLE: %s; %s\n", width, p.name().c_str(), p.unavailable().c_str(),
               p.description().c_str());
      }
    }
    return 0;
  }
  const v1::Profile& profile = ChooseProfile(args, *set);
  if (args.print_env || args.verify_pid > 0) return ProfileOnly(args, profile);
  if (!args.command.empty()) return RunCommand(args, profile, argc, argv);
  // bin/rsslab_server beside bin/rsslab_run, else Bazel's server/ package.
  if (args.server_binary.empty()) args.server_binary = FindShipped("bin/rsslab_server");
  if (args.server_binary.empty()) args.server_binary = FindShipped("server/rsslab_server");
  if (args.server_binary.empty()) Fail(kExitUsage, "cannot find rsslab_server; pass --server_binary=PATH");
  const launch::LaunchOptions options = Options(args, profile);

  // Block the signals we forward before any thread exists, so they arrive
  // only through sigwait (the pump and waiter threads inherit the mask; the
  // child resets it before exec).
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  fprintf(stderr, "rsslab_run: starting %s under profile '%s'\n", args.server_binary.c_str(),
          profile.name().c_str());
  absl::StatusOr<launch::Started> started = launch::StartVerifiedServer(options);
  if (!started.ok()) Fail(2, absl::StrCat("FAILED: ", started.status().message()));
  PrintVerified(profile, *started);
  return ForwardUntilExit(sigs, *started);
}

}  // namespace
}  // namespace rsslab

int main(int argc, char** argv) { return rsslab::Main(argc, argv); }
