// The Prometheus families any process's snapshot gives, with rsslab_server's
// names: process memory, glibc arenas, the allocator, the cache, and trims
// (by trigger and the last one). rsslab_server adds its phases, handler
// latency and workers; the Python package serves these alone
// (rsslab.serve(metrics=...)).
//
// Example:
//   Exposition e;
//   AppendMemoryMetrics(snapshot, &e);
//   AppendTrimMetrics(snapshot, trimmer.totals(), &e);
//   std::string body = e.Text();

#ifndef RSSLAB_MEMORY_SNAPSHOT_SNAPSHOT_METRICS_H_
#define RSSLAB_MEMORY_SNAPSHOT_SNAPSHOT_METRICS_H_

#include <map>
#include <string>

#include "common/metrics/exposition.h"
#include "memory/trim/trimmer.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace metrics {

// RSS, HWM, anon, threads, uptime; arenas, heap and stacks from smaps; the
// allocator's info and figures; the cache's figures.
void AppendMemoryMetrics(const rsslab::v1::Snapshot& s, Exposition* e);

// Trims total and automatic, by trigger (every trigger has a series), the
// last trim, and the snapshot's own duration.
void AppendTrimMetrics(const rsslab::v1::Snapshot& s,
                       const std::map<std::string, Trimmer::TriggerTotals>& trims,
                       Exposition* e);

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_SNAPSHOT_SNAPSHOT_METRICS_H_
