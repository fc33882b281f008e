// A sweep: the scenario's steps run once per cell of a profiles x threads x
// repeats matrix, each cell against a fresh server that rsslab_agent
// launches (and verifies) for it and stops afterwards. Every record goes to
// the one run's EventLog as it happens, tagged with its cell.
//
//   rsslab::SweepOptions o;
//   o.agent = "10.0.0.5:50060";
//   o.runner = runner_options;          // load flags, timeouts, progress
//   absl::StatusOr<rsslab::SweepOutcome> r =
//       rsslab::RunSweep(o, scenario, plan, log.get(), &stop);
//   // r->failed cells were recorded (exit status, log tail); the rest ran.
//
// A cell whose server fails to launch, crashes, or exits uncleanly is
// recorded as failed and the sweep goes on: one bad allocator setup must not
// cost the other cells. Only an interrupt or an unreachable agent ends it.
#ifndef RSSLAB_LOADGEN_SWEEP_H_
#define RSSLAB_LOADGEN_SWEEP_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadgen/engine.h"
#include "loadgen/event_log.h"
#include "loadgen/plan.h"
#include "loadgen/runner.h"
#include "proto/scenario.pb.h"

namespace rsslab {

struct SweepOptions {
  std::string agent;          // rsslab_agent address, HOST:PORT
  Runner::Options runner;     // target/control/tag are set per cell
  absl::Duration launch_timeout = absl::Seconds(120);
  absl::Duration agent_connect_timeout = absl::Seconds(10);
  int stop_grace_ms = 5000;
  // --resume: cells (CellId) that already have a successful cell_result in
  // the run directory; they are not run again.
  std::set<std::string> done_cells;
};

struct SweepOutcome {
  int cells = 0;
  int failed = 0;
  int skipped = 0;  // in done_cells
  bool interrupted = false;
};

// Replaces the matrix's profiles / threads / repeats with the command
// line's (comma-separated lists; empty keeps the scenario's).
absl::Status ApplySweepOverrides(rsslab::v1::Scenario* scenario,
                                 const std::string& profiles,
                                 const std::string& threads, int repeats);

// The cell id used in records: "PROFILE/tTHREADS/rREPEAT" (repeat 1-based).
std::string CellId(const std::string& profile, int threads, int repeat);

// Runs every cell. An error status means the sweep could not run at all
// (agent unreachable, a profile it does not know); cell failures are in the
// outcome and the records.
// `plan` is the scenario's steps, resolved (BuildPlan); every cell runs it.
absl::StatusOr<SweepOutcome> RunSweep(const SweepOptions& options,
                                      const rsslab::v1::Scenario& scenario,
                                      const Plan& plan, EventLog* log,
                                      const StopFlag* stop);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_H_
