// A sweep: the scenario's steps run once per cell of a profiles x threads x
// repeats matrix (loadgen/results/cells.h), each cell against a fresh server that a
// CellHost launches (and verifies) for it and stops afterwards: one or more
// rsslab_agents, or the loadgen itself (--local). Every record goes to the
// one run's EventLog as it happens, tagged with its cell, its index and its
// attempt.
//
//   rsslab::SweepOptions o;
//   o.hosts.push_back(rsslab::MakeAgentHost({.address = "10.0.0.5:50060"}));
//   o.hosts.push_back(rsslab::MakeAgentHost({.address = "10.0.0.6:50060"}));
//   o.runner = runner_options;          // load flags, timeouts, progress
//   absl::StatusOr<rsslab::SweepOutcome> r =
//       rsslab::RunSweep(o, scenario, plan, log.get(), &stop);
//
// One cell per host at a time; the next cell goes to whichever host is free.
// A cell whose server fails to launch, crashes, or exits uncleanly is
// recorded as failed and the sweep goes on (after Stop, death by SIGTERM and
// the --ok_exit_codes are clean; a program that died before Stop is marked
// "died before stop after N of M steps", its measured steps kept): one bad allocator setup must not
// cost the other cells. A cell lost to its host (the agent became
// unreachable, or the server was killed by SIGKILL that nobody here sent:
// the OOM killer, a preemption) is recorded as a failed attempt and queued
// again for another host, at most `max_attempts` times in all; the sweep
// finishes with the hosts that remain. An interrupt lets running cells end
// (marked interrupted) and starts no new one.
#ifndef RSSLAB_LOADGEN_SWEEP_SWEEP_H_
#define RSSLAB_LOADGEN_SWEEP_SWEEP_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "loadgen/sweep/cell_host.h"
#include "loadgen/results/cells.h"
#include "loadgen/engine.h"
#include "loadgen/results/event_log.h"
#include "loadgen/plan.h"
#include "loadgen/runner.h"
#include "proto/scenario.pb.h"

namespace rsslab {

struct SweepOptions {
  // Where cells run; each one runs one cell at a time. Prepare()d already.
  std::vector<std::unique_ptr<CellHost>> hosts;
  Runner::Options runner;  // target/control/tag are set per cell
  int stop_grace_ms = 5000;
  // --cells: the indices to run (ExpandCells order); empty: every cell.
  std::vector<int> cells;
  // --resume: cells (CellId) that already have a successful cell_result in
  // the run directory; they are not run again.
  std::set<std::string> done_cells;
  // Attempts per cell when its host fails it (1: never re-queued).
  int max_attempts = 3;
  // --ok_exit_codes: besides SIGTERM's death, the exit codes after Stop
  // that are a clean stop (agent/stop_outcome.h).
  std::vector<int> ok_exit_codes = {0};
};

struct SweepOutcome {
  int cells = 0;   // cells run (each counted once, whatever its attempts)
  int failed = 0;  // of which the last attempt failed
  int skipped = 0;  // in done_cells
  int requeued = 0;  // attempts lost to their host and run again
  bool interrupted = false;
  std::vector<std::string> lost_hosts;  // hosts that went away, with why
  // Cells that never got a host (every host was lost): their ids.
  std::vector<std::string> not_run;
  double busy_seconds = 0;  // sum of every attempt's length
};

// Replaces the matrix's profiles / threads / repeats with the command
// line's (comma-separated lists; empty keeps the scenario's).
absl::Status ApplySweepOverrides(rsslab::v1::Scenario* scenario,
                                 const std::string& profiles,
                                 const std::string& threads, int repeats);

// Runs the selected cells. An error status means the sweep could not go on
// (every host lost); cell failures are in the outcome and the records.
// `plan` is the scenario's steps, resolved (BuildPlan); every cell runs it.
absl::StatusOr<SweepOutcome> RunSweep(SweepOptions& options,
                                      const rsslab::v1::Scenario& scenario,
                                      const Plan& plan, EventLog* log,
                                      const StopFlag* stop);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_SWEEP_H_
