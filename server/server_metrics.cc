#include "server/server_metrics.h"

#include "absl/time/time.h"
#include "common/metrics/exposition.h"
#include "memory/snapshot/snapshot_metrics.h"

namespace rsslab {
namespace metrics {

std::string RenderServerMetrics(const rsslab::v1::Snapshot& s,
                                const std::map<std::string, PhaseTotals>& by_phase,
                                const LatencyHistogram::Counts& latency,
                                const std::map<std::string, Trimmer::TriggerTotals>& trims) {
  Exposition e;
  AppendMemoryMetrics(s, &e);
  e.Gauge("rsslab_phase", "1 for the current phase.", int64_t{1}, {{"phase", s.phase()}});
  for (const auto& [phase, t] : by_phase) {
    e.Counter("rsslab_requests_total", "Requests handled, by the phase they finished in.",
              t.served, {{"phase", phase}});
  }
  for (const auto& [phase, t] : by_phase) {
    e.Counter("rsslab_handler_errors_total", "Handler exceptions, by phase.", t.errors,
              {{"phase", phase}});
  }
  e.Counter("rsslab_requests_refused_total", "Requests refused before the handler: idle phase, or params outside the handler's KNOBS.",
            s.requests_refused());
  e.Histogram("rsslab_handler_latency_seconds",
              "Time in the Python handler per request (queueing excluded).", latency);

  const rsslab::v1::WorkerStats& w = s.workers();
  e.Gauge("rsslab_workers_configured", "Python worker threads configured.",
          static_cast<int64_t>(w.configured()));
  e.Gauge("rsslab_workers_busy", "Workers running a request now.", static_cast<int64_t>(w.busy()));
  e.Gauge("rsslab_workers_queue_depth", "Requests waiting for a worker.", w.queue_depth());
  e.Counter("rsslab_worker_threads_started_total",
            "Worker OS threads started, replacements under --thread_mode=churn included.",
            w.threads_started());

  AppendTrimMetrics(s, trims, &e);
  return e.Text();
}

std::string ServerMetricsText(ServerCore* core) {
  // Totals first: a trim finishing between the two reads shows in the
  // snapshot's gauges one scrape before the counters, never the reverse.
  std::map<std::string, Trimmer::TriggerTotals> trims = core->trimmer().totals();
  rsslab::v1::Snapshot snap;
  // No Python figure is exported: the scrape never waits for the GIL.
  ServerCore::SnapshotOptions o;
  o.python = false;
  core->TakeSnapshot(o, &snap);
  std::string text =
      RenderServerMetrics(snap, core->phase().ByPhase(), core->handler_latency().Read(), trims);
  // By exception type: the log prints only the first tracebacks and then
  // counts per interval (HandlerErrorLog); these counters carry the rest.
  Exposition e;
  for (const auto& [type, n] : core->HandlerErrorsByType()) {
    e.Counter("rsslab_handler_exceptions_total",
              "Handler exceptions by type (at most 64 types; later ones count as other).", n,
              {{"type", type}});
  }
  return text + e.Text();
}

}  // namespace metrics
}  // namespace rsslab
