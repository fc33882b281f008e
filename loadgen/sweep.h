// A sweep: the scenario's steps run once per cell of a profiles x threads x
// repeats matrix, each cell against a fresh server that rsslab_agent
// launches (and verifies) for it and stops afterwards. Every record goes to
// the one run's EventLog as it happens, tagged with its cell.
//
//   rsslab::SweepOptions o;
//   o.agent = "10.0.0.5:50060";
//   o.runner = runner_options;          // load flags, timeouts, progress
//   absl::StatusOr<rsslab::SweepOutcome> r =
//       rsslab::RunSweep(o, scenario, log.get(), &stop);
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
#include "loadgen/results.h"
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

// Cell ids with a successful cell_result among `events` (what --resume
// keeps).
std::set<std::string> SuccessfulCells(const std::vector<rsslab::v1::Event>& events);

// Where a resumed soak picks up: the cycle after the last one any record
// belongs to (an interrupted cycle is not finished: its records stay, the
// next number starts afresh), and when the interrupted run started (its
// --duration counts from there).
struct SoakResume {
  int first_cycle = 0;
  absl::Time started = absl::InfinitePast();
};
SoakResume SoakResumePoint(const std::vector<rsslab::v1::Event>& events);

// Why an interrupted run's header (a sweep's or a soak's) cannot be resumed
// with `now` (the scenario after overrides) and `flags_now` (the load
// flags): the matrix, the steps or the flags differ. OK when they match.
absl::Status CheckResumable(const rsslab::v1::Event& header, const rsslab::v1::Scenario& now,
                            const rsslab::v1::LoadSpec& flags_now);

// Runs every cell. An error status means the sweep could not run at all
// (agent unreachable, a profile it does not know); cell failures are in the
// outcome and the records.
absl::StatusOr<SweepOutcome> RunSweep(const SweepOptions& options,
                                      const rsslab::v1::Scenario& scenario,
                                      EventLog* log, const StopFlag* stop);

// tools/report.py (plots + "What to do"): where to find it next to this
// binary (bin/../tools, or the Bazel runfiles tree), "" if nowhere.
std::string FindReportTool();
// Runs `python3 TOOL RUN_DIR` when python3 and matplotlib are there;
// otherwise returns FAILED_PRECONDITION with the command to run later.
absl::Status RunReportTool(const std::string& tool, const std::string& run_dir,
                           std::string* output);
// The same with any arguments, e.g. {"--compare", JSON, "--png", PNG}.
absl::Status RunReportToolArgs(const std::string& tool, const std::vector<std::string>& args,
                               std::string* output);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_H_
