// Checked unit conversions for every MiB / ms / count flag and RPC field,
// defined once. (The phases' default cache limits: common/phase.h.)
//
// Every conversion checks the value against an allowed range *before*
// multiplying, so a huge value can never wrap into a small or negative one
// (`--cache_limit_mb=17592186044516` used to become 100 MiB). The
// error names the flag or field and gives the allowed range.
//
// Example:
//   absl::StatusOr<int64_t> b = MiBToBytes(flag_mb, "--cache_limit_mb", 0, 1 << 20);
//   if (!b.ok()) Die(b.status().message());
//   // "--cache_limit_mb must be between 0 and 1048576 (MiB); got -3"
//   absl::StatusOr<absl::Duration> d = MsToDuration(ms, "--shutdown_grace_ms", 0, 3600000);

#ifndef RSSLAB_COMMON_UNITS_H_
#define RSSLAB_COMMON_UNITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rsslab {

inline constexpr int64_t kMiB = int64_t{1} << 20;
// No MiB figure anywhere in rsslab may exceed this (1 PiB); it keeps every
// MiB -> bytes product far from int64 overflow.
inline constexpr int64_t kMaxMiB = int64_t{1} << 30;

// "<what> must be between <lo> and <hi><unit>; got <v>" (INVALID_ARGUMENT).
absl::Status OutOfRange(absl::string_view what, int64_t lo, int64_t hi, int64_t v,
                        absl::string_view unit = "");
absl::Status OutOfRange(absl::string_view what, double lo, double hi, double v,
                        absl::string_view unit = "");

// `v` in [lo, hi], else OutOfRange.
absl::Status CheckRange(int64_t v, absl::string_view what, int64_t lo, int64_t hi,
                        absl::string_view unit = "");
inline absl::Status CheckRange(int v, absl::string_view what, int64_t lo, int64_t hi,
                               absl::string_view unit = "") {
  return CheckRange(static_cast<int64_t>(v), what, lo, hi, unit);
}
// Unsigned flags (uint32/uint64): a value above INT64_MAX is out of range.
absl::Status CheckRange(uint64_t v, absl::string_view what, int64_t lo, int64_t hi,
                        absl::string_view unit = "");
inline absl::Status CheckRange(uint32_t v, absl::string_view what, int64_t lo, int64_t hi,
                               absl::string_view unit = "") {
  return CheckRange(static_cast<int64_t>(v), what, lo, hi, unit);
}
// `v` finite and in [lo, hi] (NaN and infinities are refused).
absl::Status CheckRange(double v, absl::string_view what, double lo, double hi,
                        absl::string_view unit = "");

// `mib` in [lo_mib, hi_mib] (hi_mib <= kMaxMiB), then mib << 20.
absl::StatusOr<int64_t> MiBToBytes(int64_t mib, absl::string_view what, int64_t lo_mib,
                                   int64_t hi_mib);
// Bytes in [lo, hi] where the bounds are whole MiB; the message gives both
// bytes and MiB so neither reader has to convert.
absl::Status CheckBytes(int64_t bytes, absl::string_view what, int64_t lo, int64_t hi);

// `ms` in [lo_ms, hi_ms], then a Duration.
absl::StatusOr<absl::Duration> MsToDuration(int64_t ms, absl::string_view what, int64_t lo_ms,
                                            int64_t hi_ms);
// `d` (an absl::Duration flag such as --duration=30s) in [lo, hi]; infinite
// durations are refused.
absl::Status CheckDuration(absl::Duration d, absl::string_view what, absl::Duration lo,
                           absl::Duration hi);

// Whole MiB in `bytes`, rounded down (for messages and MiB-valued fields).
inline int64_t BytesToMiB(int64_t bytes) { return bytes / kMiB; }

}  // namespace rsslab

#endif  // RSSLAB_COMMON_UNITS_H_
