#include "loadgen/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loadgen/scenario.h"

namespace rsslab {
namespace {

using ::rsslab::v1::LoadSpec;
using ::rsslab::v1::Step;

const char* KindName(const Step& s) {
  switch (s.kind_case()) {
    case Step::kSetPhase: return "set_phase";
    case Step::kLoad: return "load";
    case Step::kWait: return "wait";
    case Step::kSnapshot: return "snapshot";
    case Step::kTrim: return "trim";
    case Step::kRepeat: return "repeat";
    default: return "empty";
  }
}

absl::Status Resolve(const google::protobuf::RepeatedPtrField<Step>& steps,
                     const LoadSpec& defaults, const LoadSpec& flags,
                     const std::string& where, std::vector<PlanStep>* out) {
  for (int i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    PlanStep p;
    p.kind_name = KindName(step);
    p.name = step.name().empty() ? p.kind_name : step.name();
    const std::string at =
        absl::StrCat(where, step.name().empty()
                                ? absl::StrFormat("step %d", i + 1)
                                : absl::StrFormat("step %d \"%s\"", i + 1, step.name()));
    switch (step.kind_case()) {
      case Step::kSetPhase:
        p.kind = PlanStep::Kind::kSetPhase;
        p.set_phase = step.set_phase();
        break;
      case Step::kLoad: {
        p.kind = PlanStep::Kind::kLoad;
        absl::StatusOr<LoadSpec> spec = ResolveLoad(step.load(), defaults, flags);
        if (!spec.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(at, ": load: ", spec.status().message()));
        }
        p.load = *std::move(spec);
        break;
      }
      case Step::kWait:
        p.kind = PlanStep::Kind::kWait;
        p.wait_s = step.wait().seconds();
        break;
      case Step::kSnapshot:
        p.kind = PlanStep::Kind::kSnapshot;
        p.snapshot = step.snapshot();
        break;
      case Step::kTrim:
        p.kind = PlanStep::Kind::kTrim;
        p.trim = step.trim();
        break;
      case Step::kRepeat:
        p.kind = PlanStep::Kind::kRepeat;
        p.times = step.repeat().times();
        p.duration_s = step.repeat().duration_s();
        if (absl::Status s = Resolve(step.repeat().step(), defaults, flags,
                                     absl::StrCat(at, ": repeat: "), &p.steps);
            !s.ok()) {
          return s;
        }
        break;
      default:
        // Validation rejects empty steps; one here is a caller's bug.
        return absl::InvalidArgumentError(absl::StrCat(at, ": empty step"));
    }
    out->push_back(std::move(p));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Plan> BuildPlan(const rsslab::v1::Scenario& scenario,
                               const LoadSpec& flags) {
  Plan plan;
  plan.scenario = scenario.name();
  if (absl::Status s =
          Resolve(scenario.step(), scenario.load_defaults(), flags, "", &plan.steps);
      !s.ok()) {
    return s;
  }
  // After every override (flags, --command, built-ins): what will run is
  // bounded before anything is sent, closed loop and open loop alike.
  if (absl::Status s = CheckPlanBounds(scenario, flags, ""); !s.ok()) return s;
  plan.needs_control = NeedsControl(scenario);
  plan.soak = scenario.has_soak();
  if (plan.soak) {
    plan.watch_interval_s = scenario.soak().watch_interval_s() > 0
                                ? scenario.soak().watch_interval_s()
                                : kDefaultWatchIntervalS;
  }
  return plan;
}

}  // namespace rsslab
