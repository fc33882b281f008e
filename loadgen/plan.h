// A scenario resolved for execution: what the Runner executes.
//
//   auto plan = rsslab::BuildPlan(scenario, flags);   // after every override
//   if (!plan.ok()) { /* usage error: nothing was sent */ }
//   runner.Run(*plan);                                 // or RunSweep(..., *plan, ...)
//
// Each load step's parameters are resolved here, once (the step, then the
// scenario's load_defaults, then the flags, then built-in defaults; see
// ResolveLoad in scenario.h): every cycle of a repeat and every cell of a
// sweep runs the same resolved step, and the runner never looks back at the
// scenario's layers.
#ifndef RSSLAB_LOADGEN_PLAN_H_
#define RSSLAB_LOADGEN_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/scenario.pb.h"

namespace rsslab {

struct PlanStep {
  enum class Kind { kSetPhase, kLoad, kWait, kSnapshot, kTrim, kRepeat };
  Kind kind = Kind::kWait;
  std::string name;       // the step's name, or its kind when unnamed
  std::string kind_name;  // "set_phase", "load", ... as in step records

  // Exactly the one of these that `kind` names is set.
  rsslab::v1::SetPhaseStep set_phase;
  rsslab::v1::LoadSpec load;  // resolved: see ResolveLoad
  double wait_s = 0;
  rsslab::v1::SnapshotStep snapshot;
  rsslab::v1::TrimStep trim;
  // kRepeat: `steps` again and again, `times` times (0: no limit) or until
  // `duration_s` (0: no limit) after the repeat began.
  uint32_t times = 0;
  double duration_s = 0;
  std::vector<PlanStep> steps;
};

struct Plan {
  std::string scenario;  // the scenario's name
  std::vector<PlanStep> steps;
  // Some step sets phases, takes snapshots or trims, or the run watches the
  // server (a soak): the Control service must answer.
  bool needs_control = false;
  // A soak: WatchSnapshots every `watch_interval_s` (default applied) for
  // the whole run, and a line per finished cycle.
  bool soak = false;
  double watch_interval_s = 0;
};

// Resolves every step of a validated scenario (ParseScenario and friends)
// against the command line's load layer. Fails (INVALID_ARGUMENT, naming the
// step) only when a load step does not resolve with these flags.
absl::StatusOr<Plan> BuildPlan(const rsslab::v1::Scenario& scenario,
                               const rsslab::v1::LoadSpec& flags);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_PLAN_H_
