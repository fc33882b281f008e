// rsslab_run: start one rsslab_server under an allocator profile, verify the
// profile took effect, then stay in front of it (forwarding signals) until it
// exits. The user-facing form is `./rsslab serve --profile=NAME [flags]`.
//
//   rsslab_run --profile=jemalloc-bg [--profiles=FILE[,FILE]]
//       [--server_binary=PATH] [--ready_timeout_s=60] [--] [server flags...]
//   rsslab_run --list_profiles [--profiles=FILE]
//
// Every argument rsslab_run does not know goes to the server unchanged, so
// `--threads=16 --cache_limit_mb=200` just work. The server's ready line is
// printed on stdout only after verification, so scripts that wait for
// "rsslab_server ready" never talk to an unverified server. On failure the
// server is killed and rsslab_run exits 2 naming what is missing.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/profiles.h"
#include "agent/launcher.h"
#include "common/ready_line.h"
#include "common/shipped.h"

namespace rsslab {
namespace {

constexpr char kUsage[] =
    "usage: rsslab_run --profile=NAME [--profiles=FILE[,FILE]] [--server_binary=PATH]\n"
    "                  [--ready_timeout_s=60] [--] [server flags...]\n"
    "       rsslab_run --list_profiles [--profiles=FILE[,FILE]]\n"
    "Starts rsslab_server with the profile's LD_PRELOAD and environment, waits for\n"
    "its ready line, verifies /proc/PID/maps and /proc/PID/environ (and the\n"
    "allocator the server reports), then forwards SIGINT/SIGTERM to it until it\n"
    "exits. Unknown arguments are passed to the server.\n";

[[noreturn]] void Fail(int code, const std::string& msg) {
  fprintf(stderr, "rsslab_run: %s\n", msg.c_str());
  exit(code);
}

int Main(int argc, char** argv) {
  std::string profile_name, profiles_path, server_binary;
  bool list = false;
  int ready_timeout_s = 60;
  std::vector<std::string> server_args;
  bool pass_rest = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag, std::string* out) {
      std::string eq = absl::StrCat("--", flag, "=");
      if (absl::StartsWith(a, eq)) {
        *out = a.substr(eq.size());
        return true;
      }
      if (a == absl::StrCat("--", flag)) {
        if (i + 1 >= argc) Fail(64, absl::StrCat("--", flag, " needs a value\n", kUsage));
        *out = argv[++i];
        return true;
      }
      return false;
    };
    std::string timeout_s;
    if (pass_rest) server_args.push_back(a);
    else if (a == "--") pass_rest = true;
    else if (a == "-h" || a == "--help" || a == "-help") {
      fputs(kUsage, stdout);
      return 0;
    } else if (a == "--list_profiles") list = true;
    else if (value("profile", &profile_name) || value("profiles", &profiles_path) ||
             value("server_binary", &server_binary)) {
    } else if (value("ready_timeout_s", &timeout_s)) {
      if (!absl::SimpleAtoi(timeout_s, &ready_timeout_s) || ready_timeout_s <= 0 ||
          ready_timeout_s > 3600) {
        Fail(64, "--ready_timeout_s must be an integer between 1 and 3600");
      }
    } else {
      server_args.push_back(a);
    }
  }
  if (profiles_path.empty()) profiles_path = FindShipped("agent/profiles.textproto");
  if (profiles_path.empty()) Fail(64, "cannot find agent/profiles.textproto; pass --profiles=FILE");
  absl::StatusOr<v1::ProfileSet> set = profiles::LoadProfiles(profiles_path);
  if (!set.ok()) Fail(2, std::string(set.status().message()));
  if (list) {
    // An unavailable profile's second column is "UNAVAILABLE:" (scripts
    // that want what can run here skip those lines: tools/sweep.sh).
    for (const auto& p : set->profile()) {
      if (p.unavailable().empty()) {
        printf("%-18s %s\n", p.name().c_str(), p.description().c_str());
      } else {
        printf("%-18s UNAVAILABLE: %s; %s\n", p.name().c_str(), p.unavailable().c_str(),
               p.description().c_str());
      }
    }
    return 0;
  }
  if (profile_name.empty()) Fail(64, absl::StrCat("--profile=NAME is required\n", kUsage));
  const v1::Profile* profile = profiles::FindProfile(*set, profile_name);
  if (profile == nullptr) {
    Fail(2, absl::StrCat("unknown profile '", profile_name, "' (", profiles_path,
                         " has: ", profiles::ProfileNames(*set), ")"));
  }
  if (!profile->unavailable().empty()) {
    Fail(2, absl::StrCat("profile '", profile_name, "' is unavailable here: ", profile->unavailable()));
  }
  // bin/rsslab_server beside bin/rsslab_run, else Bazel's server/ package.
  if (server_binary.empty()) server_binary = FindShipped("bin/rsslab_server");
  if (server_binary.empty()) server_binary = FindShipped("server/rsslab_server");
  if (server_binary.empty()) Fail(64, "cannot find rsslab_server; pass --server_binary=PATH");

  // Block the signals we forward before any thread exists, so they arrive
  // only through sigwait below (the pump thread inherits the mask; the
  // child resets it before exec).
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) Fail(1, "pipe2 failed");
  launch::SpawnOptions so;
  so.binary = server_binary;
  so.args = server_args;
  so.env = profiles::EnvStrings(profiles::BuildLaunchEnv(*profile, profiles::CurrentEnviron()));
  so.stdout_fd = out[1];
  so.parent_death_signal = SIGTERM;  // forked from the main thread: see SpawnOptions
  absl::StatusOr<pid_t> pid = launch::Spawn(so);
  close(out[1]);
  if (!pid.ok()) Fail(2, std::string(pid.status().message()));
  fprintf(stderr, "rsslab_run: started %s (pid %d) under profile '%s'\n", server_binary.c_str(),
          *pid, profile->name().c_str());
  launch::OutputPump pump(out[0], /*sink_fd=*/1, /*own_sink=*/false, std::string(kReadyPrefix),
                          /*withhold_ready=*/true);
  auto kill_and_fail = [&](const std::string& msg) {
    kill(*pid, SIGKILL);
    int st = 0;
    waitpid(*pid, &st, 0);
    Fail(2, msg);
  };
  launch::OutputPump::Result r = pump.WaitReady(absl::Seconds(ready_timeout_s));
  if (r.state == launch::OutputPump::kEof) {
    int st = 0;
    waitpid(*pid, &st, 0);
    Fail(2, absl::StrCat("server exited before it was ready: ", launch::DescribeExit(st)));
  }
  if (r.state != launch::OutputPump::kReady) {
    kill_and_fail(absl::StrCat("server not ready after ", ready_timeout_s, " s; killed"));
  }
  absl::StatusOr<launch::VerifiedLaunch> launched =
      launch::VerifyLaunch(*pid, *profile, r.line, /*security=*/nullptr);
  if (!launched.ok()) {
    if (launched.status().code() == absl::StatusCode::kInternal) {
      kill_and_fail(std::string(launched.status().message()));
    }
    kill_and_fail(absl::StrCat("FAILED: ", launched.status().message(), "; server killed"));
  }
  const profiles::Verification* v = &launched->verification;
  std::vector<std::string> env;
  for (const auto& kv : v->env) env.push_back(absl::StrCat(kv.first, "=", kv.second));
  fprintf(stderr, "rsslab_run: profile '%s' verified in pid %d: allocator=%s%s%s%s%s\n",
          profile->name().c_str(), *pid, v->allocator.c_str(),
          v->mapped_library.empty() ? "" : " mapped=", v->mapped_library.c_str(),
          env.empty() ? "" : " env ", absl::StrJoin(env, " ").c_str());
  printf("%s\n", r.line.c_str());
  fflush(stdout);

  // Forward stop signals; leave when the server has exited.
  while (true) {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (sig == SIGCHLD) {
      int st = 0;
      if (waitpid(*pid, &st, WNOHANG) == *pid) {
        pump.WaitEof(absl::Seconds(5));
        fprintf(stderr, "rsslab_run: server %s\n", launch::DescribeExit(st).c_str());
        if (WIFEXITED(st)) return WEXITSTATUS(st);
        return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
      }
      continue;
    }
    kill(*pid, sig == SIGHUP ? SIGTERM : sig);
  }
}

}  // namespace
}  // namespace rsslab

int main(int argc, char** argv) { return rsslab::Main(argc, argv); }
