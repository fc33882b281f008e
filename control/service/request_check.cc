#include "control/service/request_check.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/untrusted_text.h"
#include "common/host_info.h"
#include "common/phase.h"
#include "common/units.h"
#include "common/trim_modes.h"

namespace rsslab {
namespace {

// A phase is echoed at most this long: a 3 MB phase echoed back whole would
// exceed the client's metadata limit and hide the INVALID_ARGUMENT.
constexpr size_t kPhaseEchoBytes = 64;

}  // namespace

CacheCeiling MemTotalCeiling() {
  const int64_t mem = MemTotalBytes();
  if (mem <= 0) return {int64_t{64} << 30, "64 GiB, MemTotal unreadable"};
  return {std::min(mem, kMaxMiB * kMiB), "MemTotal"};
}

absl::StatusOr<SetPhaseCall> CheckSetPhase(const v1::SetPhaseRequest& request,
                                           const CacheCeiling& ceiling) {
  const std::optional<v1::Phase> parsed = ParsePhase(request.phase());
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat("unknown phase '",
                                                   Echo(request.phase(), kPhaseEchoBytes),
                                                   "'; allowed: ", AllowedPhases()));
  }
  if (absl::Status m = CheckTrimMode(request.trim_mode(), "trim_mode"); !m.ok()) return m;
  SetPhaseCall call;
  call.phase = *parsed;
  call.detail = request.detail();
  call.trim_mode = static_cast<v1::TrimMode>(request.trim_mode());
  call.gc = request.has_gc() ? request.gc() : true;
  if (request.has_cache_limit_bytes()) {
    call.cache_limit_bytes = request.cache_limit_bytes();
    if (absl::Status r = CheckBytes(call.cache_limit_bytes, "cache_limit_bytes", 0, ceiling.bytes);
        !r.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.message(), " (the ceiling is ", ceiling.source, ")"));
    }
  } else if (call.phase == v1::PHASE_FILL) {
    call.cache_limit_bytes = kDefaultFillCacheBytes;
  } else if (call.phase == v1::PHASE_SHRINK) {
    call.cache_limit_bytes = kDefaultShrinkCacheBytes;
  }
  return call;
}

absl::Status CheckTrimMode(int mode, absl::string_view field) {
  if (!v1::TrimMode_IsValid(mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " must be ", TrimModeChoices(), "; got ", mode));
  }
  return absl::OkStatus();
}

absl::StatusOr<TrimCall> CheckTrim(const v1::TrimRequest& request) {
  if (absl::Status m = CheckTrimMode(request.mode(), "mode"); !m.ok()) return m;
  TrimCall call;
  call.mode = static_cast<v1::TrimMode>(request.mode());
  call.gc = request.gc();
  return call;
}

}  // namespace rsslab
