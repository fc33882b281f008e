#include "common/units.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rsslab {

absl::Status OutOfRange(absl::string_view what, int64_t lo, int64_t hi, int64_t v,
                        absl::string_view unit) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be between ", lo, " and ", hi, unit, "; got ", v));
}

absl::Status OutOfRange(absl::string_view what, double lo, double hi, double v,
                        absl::string_view unit) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s must be between %g and %g%s; got %g", what, lo, hi, unit, v));
}

absl::Status CheckRange(int64_t v, absl::string_view what, int64_t lo, int64_t hi,
                        absl::string_view unit) {
  if (v < lo || v > hi) return OutOfRange(what, lo, hi, v, unit);
  return absl::OkStatus();
}

absl::Status CheckRange(uint64_t v, absl::string_view what, int64_t lo, int64_t hi,
                        absl::string_view unit) {
  if (v > static_cast<uint64_t>(hi) || static_cast<int64_t>(v) < lo) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be between ", lo, " and ", hi, unit, "; got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckRange(double v, absl::string_view what, double lo, double hi,
                        absl::string_view unit) {
  // Written so NaN fails: every comparison with NaN is false.
  if (!(v >= lo && v <= hi) || !std::isfinite(v)) return OutOfRange(what, lo, hi, v, unit);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> MiBToBytes(int64_t mib, absl::string_view what, int64_t lo_mib,
                                   int64_t hi_mib) {
  if (hi_mib > kMaxMiB) hi_mib = kMaxMiB;
  if (absl::Status s = CheckRange(mib, what, lo_mib, hi_mib, " (MiB)"); !s.ok()) return s;
  return mib * kMiB;
}

absl::Status CheckBytes(int64_t bytes, absl::string_view what, int64_t lo, int64_t hi) {
  if (bytes < lo || bytes > hi) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s must be between %d and %d bytes (%d to %d MiB); got %d", what, lo,
                        hi, lo / kMiB, hi / kMiB, bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<absl::Duration> MsToDuration(int64_t ms, absl::string_view what, int64_t lo_ms,
                                            int64_t hi_ms) {
  if (absl::Status s = CheckRange(ms, what, lo_ms, hi_ms, " (ms)"); !s.ok()) return s;
  return absl::Milliseconds(ms);
}

absl::Status CheckDuration(absl::Duration d, absl::string_view what, absl::Duration lo,
                           absl::Duration hi) {
  if (d < lo || d > hi || d == absl::InfiniteDuration() || d == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be between ",
                                                   absl::FormatDuration(lo), " and ",
                                                   absl::FormatDuration(hi), "; got ",
                                                   absl::FormatDuration(d)));
  }
  return absl::OkStatus();
}

}  // namespace rsslab
