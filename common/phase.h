// Phase names on the wire ("fill") <-> the Phase enum in proto/control.proto,
// which is the one list of phases. Every binary converts through here.
//
// Usage:
//   std::optional<rsslab::v1::Phase> p = rsslab::ParsePhase(request.phase());
//   if (!p) return absl::InvalidArgumentError(absl::StrCat(
//       "unknown phase; allowed: ", rsslab::AllowedPhases()));
//   if (*p == rsslab::v1::PHASE_IDLE) ...;
//   for (rsslab::v1::Phase c : rsslab::kCyclePhases) PhaseName(c);  // fill shrink idle trim

#ifndef RSSLAB_COMMON_PHASE_H_
#define RSSLAB_COMMON_PHASE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "proto/control.pb.h"

namespace rsslab {

// Seed 000's cycle, in order.
inline constexpr v1::Phase kCyclePhases[] = {v1::PHASE_FILL, v1::PHASE_SHRINK, v1::PHASE_IDLE,
                                             v1::PHASE_TRIM};

// The cache limit SetPhase gives fill and shrink when the request names
// none: seed 000's 100 MB cache for fill, 10 MB for shrink. Part of the
// phases' contract, so every Control backend (the server, the Python
// package) uses the same.
inline constexpr int64_t kDefaultFillCacheBytes = int64_t{100} << 20;
inline constexpr int64_t kDefaultShrinkCacheBytes = int64_t{10} << 20;

// "fill" for PHASE_FILL; "" for PHASE_UNSPECIFIED and unknown values.
std::string PhaseName(v1::Phase phase);

// The phase a client may name (the cycle's four and "start"); nullopt
// otherwise, "" and "unspecified" included.
std::optional<v1::Phase> ParsePhase(absl::string_view name);

// "fill, shrink, idle, trim (or start)", for error messages.
std::string AllowedPhases();

}  // namespace rsslab

#endif  // RSSLAB_COMMON_PHASE_H_
