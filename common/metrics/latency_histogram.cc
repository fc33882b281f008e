#include "common/metrics/latency_histogram.h"

namespace rsslab {
namespace metrics {

void LatencyHistogram::Observe(absl::Duration d) {
  int64_t ns = absl::ToInt64Nanoseconds(d);
  if (ns < 0) ns = 0;
  const double s = static_cast<double>(ns) * 1e-9;
  int i = 0;
  while (i < kBuckets && s > kBoundsSeconds[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
}

LatencyHistogram::Counts LatencyHistogram::Read() const {
  Counts c;
  uint64_t running = 0;
  for (int i = 0; i < kBuckets; ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    c.cumulative[i] = running;
  }
  c.count = running + buckets_[kBuckets].load(std::memory_order_relaxed);
  c.sum_seconds = static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9;
  return c;
}

}  // namespace metrics
}  // namespace rsslab
