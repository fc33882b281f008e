// Scenario files (protobuf text format, proto/scenario.proto), built-ins,
// validation, and resolution of a load step against defaults and flags.
//
//   rsslab::v1::LoadSpec flags = ...;              // from the command line
//   auto sc = rsslab::LoadScenarioFile("x.txtpb", flags);  // or:
//   auto sc = rsslab::BuiltinScenario("seed", flags);
//   if (!sc.ok()) { /* message: "x.txtpb:7: step 2 "fill": load: ..." */ }
//   auto plan = rsslab::BuildPlan(*sc, flags);   // plan.h: every load step
//                                                // resolved with ResolveLoad
//
// Everything is checked before any traffic: a scenario that parses but would
// fail half-way (an unknown phase in step 9) is rejected up front, with the
// file and line of every problem.
//
// Precedence of load parameters: the step, then the scenario's
// load_defaults, then the flags, then built-in defaults. Open versus closed
// loop is decided by the first of those layers that sets `rate` or
// `concurrency`; one layer setting both is a contradiction.
#ifndef RSSLAB_LOADGEN_SCENARIO_H_
#define RSSLAB_LOADGEN_SCENARIO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/scenario.pb.h"

namespace rsslab {

// Built-in defaults for a load step that no layer sets.
inline constexpr uint32_t kDefaultConcurrency = 64;
inline constexpr uint32_t kDefaultChannels = 4;
inline constexpr uint32_t kDefaultDeadlineMs = 10000;
inline constexpr uint32_t kDefaultMaxOutstanding = 10000;
// Soak: WatchSnapshots interval when the scenario's soak block sets none.
inline constexpr double kDefaultWatchIntervalS = 5;

// Parses and validates; `origin` names the text in errors (a file name).
absl::StatusOr<rsslab::v1::Scenario> ParseScenario(
    absl::string_view text, absl::string_view origin,
    const rsslab::v1::LoadSpec& flags);
absl::StatusOr<rsslab::v1::Scenario> LoadScenarioFile(
    const std::string& path, const rsslab::v1::LoadSpec& flags);

// The built-ins (BuiltinNames()), parsed and checked like a file:
//   seed   seed 000 exactly: fill, shrink, idle, trim, a snapshot after each
//   quick  the same cycle at smoke-test size
//   sweep  seed 000's matrix (a sweep block: profiles x threads x repeats),
//          run through rsslab_agent
//   soak   seed 000's cycle at a fifth of its size, repeated for --duration
//          while the server is watched
// Request counts are multiplied by flags.scale().
absl::StatusOr<rsslab::v1::Scenario> BuiltinScenario(
    absl::string_view name, const rsslab::v1::LoadSpec& flags);
std::vector<std::string> BuiltinNames();
// The text of a built-in, as a user could copy it into a file.
absl::StatusOr<std::string> BuiltinText(absl::string_view name);

// A scenario of a single load step taken from the flags alone.
rsslab::v1::Scenario AdHocScenario();

// Contradictions inside one layer (a step's load, load_defaults, or the
// flags): rate with concurrency, requests with duration, negative numbers...
// `where` prefixes each message. Returns every problem, one per line.
std::vector<std::string> CheckLoadLayer(const rsslab::v1::LoadSpec& spec,
                                        absl::string_view where);

// The fully resolved parameters of one load step: mode chosen, defaults
// applied, requests scaled. The result has either rate > 0 (open loop) or
// concurrency > 0 (closed loop), channels > 0, deadline_ms > 0, seed != 0,
// and requests > 0 or duration_s > 0.
absl::StatusOr<rsslab::v1::LoadSpec> ResolveLoad(
    const rsslab::v1::LoadSpec& step, const rsslab::v1::LoadSpec& defaults,
    const rsslab::v1::LoadSpec& flags);

// Soak: --duration is the soak's length: every top-level repeat step runs
// for `seconds` (times cleared), not the length of each load step.
void ApplySoakDuration(rsslab::v1::Scenario* scenario, double seconds);

// Whether the run needs the Control service: a step sets phases, takes
// snapshots or trims, or the scenario is a soak (it watches snapshots).
// The bounds of a whole run, after every repeat is multiplied out (counts
// saturate, never wrap): at most kMaxPlanRequests requests from count-bound
// load steps, warm-up included, and kMaxRunTimeS of what bounds time (waits,
// durations, requests / rate). INVALID_ARGUMENT naming the step (its path
// from the top, after `origin`) where a bound is crossed. A repeat with only
// duration_s counts one iteration's requests: its time bounds the rest.
absl::Status CheckPlanBounds(const rsslab::v1::Scenario& scenario,
                             const rsslab::v1::LoadSpec& flags, absl::string_view origin);

bool NeedsControl(const rsslab::v1::Scenario& scenario);

// --wait: every wait step, inside repeats too, lasts `seconds` instead.
void ApplyWaitSeconds(rsslab::v1::Scenario* scenario, double seconds);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SCENARIO_H_
