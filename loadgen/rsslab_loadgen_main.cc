// rsslab_loadgen: drives an rsslab_server over gRPC and scripts its phases.
// A dispatcher: each subcommand has its own entry point and exit status
// (0 ok, 1 failed, 2 bad input, 130 interrupted; loadgen/results/exit_codes.h).
//
//   rsslab_loadgen [run] ...           loadgen/run/run_main.h (a scenario or a sweep)
//   rsslab_loadgen sweep ...           loadgen/run/sweep_main.h (= --builtin=sweep)
//   rsslab_loadgen merge --out=DIR RUN_DIR...         loadgen/sweep/merge_main.h
//   rsslab_loadgen report RUN_DIR...                  loadgen/results/report_main.h
//   rsslab_loadgen compare BASE NEW [--fail_if=...]   loadgen/results/compare_main.h
//   rsslab_loadgen gate --service=... [--head_env=...]  loadgen/gate/gate_main.h
#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "agent/log_cap.h"
#include "common/flags_parse.h"
#include "loadgen/gate/gate_main.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/results/compare_main.h"
#include "loadgen/results/report_main.h"
#include "loadgen/run/run_main.h"
#include "loadgen/run/sweep_main.h"
#include "loadgen/run/run_flags.h"
#include "loadgen/sweep/merge_main.h"
#include "loadgen/run/usage.h"

// No subcommand (or `run`) runs a scenario or a sweep.
int main(int argc, char** argv) {
  // A --local cell's log writer (agent/log_cap.h), before any flag.
  int rc = 0;
  if (rsslab::launch::RunLogWriterIfAsked(argc, argv, &rc)) return rc;

  // Before any thread exists: the run's signal thread takes them (sigwait).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  rsslab::SetLoadgenUsage();
  std::vector<char*> pos = rsslab::ParseFlags(argc, argv);
  const std::string sub = pos.size() >= 2 ? pos[1] : "";
  const std::vector<std::string> rest(pos.begin() + std::min<size_t>(pos.size(), 2), pos.end());
  if (sub == "compare") return rsslab::CompareMain(rest, std::vector<std::string>(argv, argv + argc));
  if (sub == "gate" && rest.empty()) return rsslab::GateMain(argc, argv, sigs);
  if (sub == "report") return rsslab::ReportMain(rest);
  if (sub == "merge") return rsslab::MergeMain(rest, absl::GetFlag(FLAGS_out));
  if (sub == "run" && rest.empty()) return rsslab::RunMain(argc, argv, sigs);
  if (sub == "sweep" && rest.empty()) return rsslab::SweepMain(argc, argv, sigs);
  if (!sub.empty()) {
    return rsslab::cli::Fail(rsslab::cli::kExitUsage,
                             absl::StrFormat("unexpected argument \"%s\" (see --help)",
                                             (sub == "run" || sub == "sweep" || sub == "gate") ? rest[0] : sub));
  }
  return rsslab::RunMain(argc, argv, sigs);
}
