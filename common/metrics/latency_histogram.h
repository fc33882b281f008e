// A fixed-bucket latency histogram for Prometheus, recorded lock-free.
//
// Observe() is on the server's hot path (once per handled request, on a
// worker thread), so it only does a short linear scan over 16 bounds and
// three relaxed atomic increments; readers take a copy with Read().
//
// Example:
//   LatencyHistogram h;
//   h.Observe(absl::Microseconds(740));
//   LatencyHistogram::Counts c = h.Read();
//   // c.cumulative[i] = observations <= LatencyHistogram::kBoundsSeconds[i];
//   // c.count (== the +Inf bucket), c.sum_seconds

#ifndef RSSLAB_COMMON_METRICS_LATENCY_HISTOGRAM_H_
#define RSSLAB_COMMON_METRICS_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace rsslab {
namespace metrics {

class LatencyHistogram {
 public:
  // Upper bounds (le) in seconds; from 100 us (a noop handler) to 10 s (a
  // stuck one). The +Inf bucket is implicit.
  static constexpr int kBuckets = 16;
  static constexpr std::array<double, kBuckets> kBoundsSeconds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};

  struct Counts {
    // cumulative[i]: observations <= kBoundsSeconds[i].
    std::array<uint64_t, kBuckets> cumulative{};
    // All observations (the +Inf bucket): the sum of the buckets as read,
    // so it is always consistent with them even under concurrent writes.
    uint64_t count = 0;
    double sum_seconds = 0;
  };

  void Observe(absl::Duration d);
  Counts Read() const;

 private:
  // Non-cumulative: the bucket an observation falls in; index kBuckets is
  // +Inf.
  std::array<std::atomic<uint64_t>, kBuckets + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_COMMON_METRICS_LATENCY_HISTOGRAM_H_
