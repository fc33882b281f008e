#include "loadgen/results/histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace rsslab {
namespace {

// 2048 exact buckets, then 1024 per power of two: relative width <= 1/1024.
constexpr int kSubBits = 10;
constexpr uint64_t kSub = uint64_t{1} << kSubBits;  // 1024
constexpr uint64_t kLinear = 2 * kSub;               // 2048

int HighBit(uint64_t v) { return 63 - __builtin_clzll(v); }

}  // namespace

Histogram::Histogram() : counts_(BucketCount(), 0) {}

size_t Histogram::BucketCount() {
  return IndexOf(kMaxTrackable) + 1;
}

size_t Histogram::IndexOf(uint64_t value) {
  if (value > kMaxTrackable) value = kMaxTrackable;
  if (value < kLinear) return static_cast<size_t>(value);
  // value in [2^h, 2^(h+1)), h >= 11; shift so the top 11 bits remain.
  const int shift = HighBit(value) - kSubBits;  // >= 1
  const uint64_t top = value >> shift;         // in [1024, 2048)
  return static_cast<size_t>(kLinear + (shift - 1) * kSub + (top - kSub));
}

uint64_t Histogram::LowestEquivalent(size_t index) {
  if (index < kLinear) return index;
  const uint64_t rel = index - kLinear;
  const int shift = static_cast<int>(rel / kSub) + 1;
  const uint64_t top = kSub + rel % kSub;
  return top << shift;
}

uint64_t Histogram::HighestEquivalent(size_t index) {
  if (index < kLinear) return index;
  const uint64_t rel = index - kLinear;
  const int shift = static_cast<int>(rel / kSub) + 1;
  return LowestEquivalent(index) + (uint64_t{1} << shift) - 1;
}

void Histogram::RecordN(uint64_t value, uint64_t n) {
  if (n == 0) return;
  counts_[IndexOf(value)] += n;
  if (count_ == 0 || value < min_) min_ = value;
  if (value > max_) max_ = value;
  count_ += n;
  sum_ += value * n;
}

void Histogram::Merge(const Histogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  if (count_ == 0 || other.min_ < min_) min_ = other.min_;
  max_ = std::max(max_, other.max_);
  count_ += other.count_;
  sum_ += other.sum_;
}

void Histogram::Reset() {
  std::fill(counts_.begin(), counts_.end(), 0);
  count_ = min_ = max_ = sum_ = 0;
}

double Histogram::mean() const {
  return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0;
}

double Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 100.0);
  uint64_t rank = static_cast<uint64_t>(
      std::ceil(q / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    seen += counts_[i];
    if (seen >= rank) {
      const double lo = static_cast<double>(LowestEquivalent(i));
      const double hi = static_cast<double>(HighestEquivalent(i));
      const double mid = i < kLinear ? lo : (lo + hi) / 2;
      return std::clamp(mid, static_cast<double>(min_),
                        static_cast<double>(max_));
    }
  }
  return static_cast<double>(max_);
}

rsslab::v1::HistogramData Histogram::ToProto() const {
  rsslab::v1::HistogramData out;
  out.set_sig_digits(kSigDigits);
  for (size_t i = 0; i < counts_.size(); ++i) {
    if (counts_[i] == 0) continue;
    out.add_index(static_cast<uint32_t>(i));
    out.add_count(counts_[i]);
  }
  return out;
}

absl::StatusOr<Histogram> Histogram::FromProto(
    const rsslab::v1::HistogramData& data) {
  if (data.sig_digits() != kSigDigits) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "histogram has %d significant digits, this build reads %d",
        data.sig_digits(), kSigDigits));
  }
  if (data.index_size() != data.count_size()) {
    return absl::InvalidArgumentError("histogram index/count lengths differ");
  }
  Histogram h;
  for (int i = 0; i < data.index_size(); ++i) {
    const size_t idx = data.index(i);
    if (idx >= h.counts_.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("histogram bucket %d out of range", idx));
    }
    // Bucket midpoints stand in for the lost exact values; min/max/mean of a
    // decoded histogram are therefore bucket-accurate, not exact.
    const uint64_t v = (LowestEquivalent(idx) + HighestEquivalent(idx)) / 2;
    h.counts_[idx] += data.count(i);
    const uint64_t n = data.count(i);
    if (n == 0) continue;
    if (h.count_ == 0 || LowestEquivalent(idx) < h.min_) {
      h.min_ = LowestEquivalent(idx);
    }
    h.max_ = std::max(h.max_, HighestEquivalent(idx));
    h.count_ += n;
    h.sum_ += v * n;
  }
  return h;
}

rsslab::v1::Latency Histogram::LatencyMicros() const {
  rsslab::v1::Latency l;
  l.set_p50_us(Percentile(50) / 1e3);
  l.set_p90_us(Percentile(90) / 1e3);
  l.set_p99_us(Percentile(99) / 1e3);
  l.set_p999_us(Percentile(99.9) / 1e3);
  l.set_max_us(static_cast<double>(max()) / 1e3);
  l.set_mean_us(mean() / 1e3);
  l.set_min_us(static_cast<double>(min()) / 1e3);
  l.set_count(count_);
  return l;
}

}  // namespace rsslab
