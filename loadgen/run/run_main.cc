#include "loadgen/run/run_main.h"

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "loadgen/engine.h"
#include "loadgen/results/cells.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/run/execute.h"
#include "loadgen/run/finish.h"
#include "loadgen/run/hosts.h"
#include "loadgen/run/invocation.h"
#include "loadgen/run/run_dir.h"
#include "loadgen/run/run_flags.h"
#include "loadgen/scenario.h"
#include "loadgen/sweep/cell_host.h"
#include "loadgen/sweep/sweep_flags.h"

// --json (defined with `compare`, loadgen/results/compare_main.cc) also makes --print_cells JSON.
ABSL_DECLARE_FLAG(bool, json);

namespace rsslab {
namespace {

using rsslab::cli::Fail;
constexpr int kExitUsage = rsslab::cli::kExitUsage;
using run::CheckHosts;
using run::Execute;
using run::Finish;
using run::HostsBeforeTheRun;
using run::Invocation;
using run::Metrics;
using run::OpenMetrics;
using run::OpenRunDir;
using run::Outcome;
using run::ParseInvocation;
using run::PrepareCellDir;
using run::RunDir;
using run::StopOnSignals;

// --print_builtin=NAME: the built-in scenario's text.
int PrintBuiltin() {
  auto text = rsslab::BuiltinText(absl::GetFlag(FLAGS_print_builtin));
  if (!text.ok()) return Fail(kExitUsage, text.status().message());
  printf("%s", text->c_str());
  return 0;
}

// --print_cells: the matrix's numbered cells, as text or JSON.
int PrintCells(const Invocation& inv) {
  const std::vector<rsslab::SweepCell> cells = rsslab::ExpandCells(inv.scenario.sweep());
  if (absl::GetFlag(FLAGS_json)) {
    printf("%s", rsslab::CellsJson(cells, inv.matrix_id).c_str());
  } else {
    printf("# matrix %s: %zu cells (repeats outermost, then threads, then profiles)\n%s",
           inv.matrix_id.c_str(), cells.size(), rsslab::CellsText(cells).c_str());
  }
  return 0;
}

}  // namespace

int RunMain(int argc, char** argv, const sigset_t& sigs) {
  if (!absl::GetFlag(FLAGS_print_builtin).empty()) return PrintBuiltin();
  absl::StatusOr<Invocation> inv = ParseInvocation(std::vector<std::string>(argv, argv + argc));
  if (!inv.ok()) return Fail(kExitUsage, inv.status().message());
  if (absl::GetFlag(FLAGS_print_cells)) return PrintCells(*inv);
  std::vector<std::unique_ptr<rsslab::CellHost>> hosts;
  bool checked = false;
  if (int rc = HostsBeforeTheRun(*inv, &hosts, &checked); rc != 0) return rc;
  Metrics metrics;
  if (int rc = OpenMetrics(*inv, &metrics); rc != 0) return rc;
  RunDir dir;
  if (inv->in_place) {
    bool done = false;
    if (int rc = PrepareCellDir(&*inv, &dir, &done); rc != 0 || done) return rc;
  }
  if (int rc = OpenRunDir(*inv, &dir); rc != 0) return rc;
  rsslab::StopFlag stop;
  StopOnSignals(sigs, &stop);
  Outcome outcome;
  const bool sweep = inv->scenario.has_sweep();
  const absl::Status ready = sweep && !checked ? CheckHosts(*inv, hosts) : absl::OkStatus();
  if (ready.ok()) {
    outcome = Execute(*inv, &dir, &metrics, std::move(hosts), &stop);
  } else {
    outcome.sweep = true;
    outcome.start = absl::Now();
    outcome.status = ready;
  }
  return Finish(*inv, outcome, &dir, &metrics, stop);
}

}  // namespace rsslab
