// A log-bucketed latency histogram: 3 significant digits, fixed memory.
//
//   rsslab::Histogram h;            // ~270 KiB, whatever the count
//   h.Record(absl::ToInt64Nanoseconds(latency));
//   other.Merge(h);                 // e.g. one per channel, merged at the end
//   double p99_ns = h.Percentile(99.0);
//
// Layout (HdrHistogram-like): values below 2048 have a bucket each; above,
// every power-of-two range [2^k, 2^(k+1)) is split into 1024 equal buckets,
// so a bucket is never wider than 1/1024 of its lower edge (< 0.1%, which is
// three significant digits). Values are unsigned integers (nanoseconds for
// latency) up to kMaxTrackable; larger values land in the last bucket but
// max() stays exact. Not thread-safe: give each thread (or shard) its own and
// Merge(); that is cheaper than a shared lock on every RPC.
#ifndef RSSLAB_LOADGEN_RESULTS_HISTOGRAM_H_
#define RSSLAB_LOADGEN_RESULTS_HISTOGRAM_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/results.pb.h"

namespace rsslab {

class Histogram {
 public:
  static constexpr int kSigDigits = 3;
  // 2^42 ns is about 73 minutes: no RPC deadline is longer.
  static constexpr uint64_t kMaxTrackable = (uint64_t{1} << 42) - 1;

  Histogram();

  void Record(uint64_t value) { RecordN(value, 1); }
  void RecordN(uint64_t value, uint64_t n);
  void Merge(const Histogram& other);
  void Reset();

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const;
  // q in [0, 100]. The value of rank ceil(q/100 * count) (1-based) of the
  // sorted values, to within one bucket (the bucket's midpoint, clamped to
  // [min, max]); 0 for an empty histogram.
  double Percentile(double q) const;

  // Sparse form for results.proto (only non-empty buckets).
  rsslab::v1::HistogramData ToProto() const;
  static absl::StatusOr<Histogram> FromProto(
      const rsslab::v1::HistogramData& data);
  // p50/p90/p99/p99.9/max/mean/min in microseconds (values recorded in ns).
  rsslab::v1::Latency LatencyMicros() const;

  // Bucket arithmetic, public for tests.
  static size_t IndexOf(uint64_t value);
  static uint64_t LowestEquivalent(size_t index);
  static uint64_t HighestEquivalent(size_t index);
  static size_t BucketCount();

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = 0;
  uint64_t max_ = 0;
  // Exact sum, for the mean (2^64 ns is 584 years of latency).
  uint64_t sum_ = 0;
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_HISTOGRAM_H_
