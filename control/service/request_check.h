// The one check of SetPhase and Trim requests, run by the Control service
// (ControlCalls) before a call reaches the backend, in every host:
// phase names, trim modes, the fill/shrink cache-limit defaults and the
// cache ceiling are decided here, so the two cannot drift apart.
//
// Example:
//   absl::StatusOr<SetPhaseCall> call = CheckSetPhase(request, MemTotalCeiling());
//   if (!call.ok()) return call.status();
//   if (call->cache_limit_bytes >= 0) cache.Resize(call->cache_limit_bytes);

#ifndef RSSLAB_CONTROL_SERVICE_REQUEST_CHECK_H_
#define RSSLAB_CONTROL_SERVICE_REQUEST_CHECK_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/control.pb.h"

namespace rsslab {

// The largest cache_limit_bytes a backend accepts, and where that number
// comes from (named in the refusal, so a caller knows what to change).
struct CacheCeiling {
  int64_t bytes = 0;
  std::string source;  // "MemTotal", "--max_cache_limit_mb"
};

// This host's MemTotal (at most kMaxMiB MiB): the ceiling of both backends
// unless the server is given --max_cache_limit_mb. Unreadable
// /proc/meminfo: 64 GiB, said so in `source`.
CacheCeiling MemTotalCeiling();

// A SetPhase request as the backend acts on it.
struct SetPhaseCall {
  v1::Phase phase = v1::PHASE_UNSPECIFIED;
  // The cache limit to set: the request's, else the phase's default (fill,
  // shrink); -1 leaves the limit as it is.
  int64_t cache_limit_bytes = -1;
  bool gc = true;  // unset in the request: collect
  bool detail = false;
  v1::TrimMode trim_mode = v1::TRIM_MODE_DEFAULT;  // for PHASE_TRIM
};

// A Trim request as the backend acts on it.
struct TrimCall {
  v1::TrimMode mode = v1::TRIM_MODE_DEFAULT;
  bool gc = false;
};

// A trim mode the proto does not name (a newer or a hostile client) is
// refused, not treated as the default; `field` names it in the message.
absl::Status CheckTrimMode(int mode, absl::string_view field);

// INVALID_ARGUMENT, one line naming the field as the proto spells it, for
// an unknown phase (quoted with Echo and cut), an unknown trim_mode or a
// cache_limit_bytes outside [0, ceiling].
absl::StatusOr<SetPhaseCall> CheckSetPhase(const v1::SetPhaseRequest& request,
                                           const CacheCeiling& ceiling);

// INVALID_ARGUMENT for an unknown mode.
absl::StatusOr<TrimCall> CheckTrim(const v1::TrimRequest& request);

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_SERVICE_REQUEST_CHECK_H_
