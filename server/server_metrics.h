// The server's Prometheus metrics: a snapshot's figures (RSS, arenas,
// allocator, cache, workers, trims), requests and errors per phase, and the
// handler latency histogram, rendered as exposition text. A scrape costs
// one snapshot without gc (the same as GetSnapshot with gc=false), so the
// values agree with a Control snapshot taken at the same moment.
//
// Example:
//   auto http = MetricsHttpServer::Start(
//       "127.0.0.1:9464", [core] { return ServerMetricsText(core); });

#ifndef RSSLAB_SERVER_SERVER_METRICS_H_
#define RSSLAB_SERVER_SERVER_METRICS_H_

#include <map>
#include <string>

#include "proto/snapshot.pb.h"
#include "server/core.h"
#include "common/metrics/latency_histogram.h"
#include "server/phase_state.h"
#include "memory/trim/trimmer.h"

namespace rsslab {
namespace metrics {

// Takes a snapshot of `core` and renders everything.
std::string ServerMetricsText(ServerCore* core);

// The rendering alone (tested without a server).
std::string RenderServerMetrics(const rsslab::v1::Snapshot& snap,
                                const std::map<std::string, PhaseTotals>& by_phase,
                                const LatencyHistogram::Counts& latency,
                                const std::map<std::string, Trimmer::TriggerTotals>& trims = {});

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_SERVER_SERVER_METRICS_H_
