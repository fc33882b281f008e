#include "server/server_metrics.h"

#include "absl/time/time.h"
#include "common/metrics/exposition.h"

namespace rsslab {
namespace metrics {

std::string RenderServerMetrics(const rsslab::v1::Snapshot& s,
                                const std::map<std::string, PhaseTotals>& by_phase,
                                const LatencyHistogram::Counts& latency,
                                const std::map<std::string, Trimmer::TriggerTotals>& trims) {
  Exposition e;
  const rsslab::v1::ProcStatus& st = s.status();
  e.Gauge("rsslab_process_resident_memory_bytes", "VmRSS of the server process.", st.rss_bytes());
  e.Gauge("rsslab_process_resident_memory_max_bytes", "VmHWM: the peak RSS since start.",
          st.hwm_bytes());
  e.Gauge("rsslab_process_anon_memory_bytes", "RssAnon: anonymous resident memory.",
          st.anon_bytes());
  e.Gauge("rsslab_process_threads", "OS threads of the process (Threads in /proc/self/status).",
          static_cast<int64_t>(st.threads()));
  e.Gauge("rsslab_uptime_seconds", "Seconds since the server started.", s.uptime_s());

  const rsslab::v1::MemoryMap& mm = s.memory_map();
  e.Gauge("rsslab_glibc_arenas", "glibc thread-arena heaps found in /proc/self/smaps.",
          static_cast<int64_t>(mm.arena_count()));
  e.Gauge("rsslab_glibc_arena_resident_bytes", "Resident bytes of the glibc thread arenas.",
          mm.arena_rss_bytes());
  e.Gauge("rsslab_heap_resident_bytes", "Resident bytes of the brk heap (glibc main arena).",
          mm.heap_rss_bytes());
  e.Gauge("rsslab_thread_stacks_resident_bytes", "Resident bytes of thread stacks.",
          mm.stack_rss_bytes());

  const Labels alloc = {{"allocator", s.allocator()}};
  e.Gauge("rsslab_allocator_info", "The allocator actually loaded (from /proc/self/maps).",
          int64_t{1}, {{"allocator", s.allocator()}, {"library", s.allocator_library()}});
  const rsslab::v1::AllocatorStats& as = s.allocator_stats();
  // Only what the loaded allocator reports: a missing series is honest, a
  // zero would read as "nothing resident".
  if (as.allocated_bytes() > 0) {
    e.Gauge("rsslab_allocator_allocated_bytes", "Bytes in use according to the allocator.",
            as.allocated_bytes(), alloc);
  }
  if (as.resident_bytes() > 0) {
    e.Gauge("rsslab_allocator_resident_bytes", "Resident bytes according to the allocator.",
            as.resident_bytes(), alloc);
  }
  if (as.has_jemalloc() && as.jemalloc().active() > 0) {
    e.Gauge("rsslab_allocator_active_bytes", "jemalloc stats.active: bytes in active pages.",
            as.jemalloc().active(), alloc);
  }

  const rsslab::v1::CacheStats& c = s.cache();
  e.Gauge("rsslab_cache_bytes", "Bytes held by the LRU cache.", c.cache_bytes());
  e.Gauge("rsslab_cache_entries", "Entries in the LRU cache.", c.cache_entries());
  e.Gauge("rsslab_cache_limit_bytes", "The LRU cache's byte limit.", c.cache_limit_bytes());
  e.Counter("rsslab_cache_evictions_total", "Entries evicted from the LRU cache.", c.evictions());
  e.Counter("rsslab_cache_hits_total", "LRU cache hits.", c.hits());
  e.Counter("rsslab_cache_misses_total", "LRU cache misses.", c.misses());

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

  e.Counter("rsslab_trims_total", "Trims run (phase, manual and automatic).", s.trims_total());
  e.Counter("rsslab_auto_trims_total", "Trims run by the automatic policy (--auto_trim).",
            s.auto_trims_total());
  // Every trigger always has a series (0 until it fires), so rate() and
  // alerts work from the first scrape.
  std::map<std::string, Trimmer::TriggerTotals> by_trigger = trims;
  for (const char* t : {"manual", "phase", "auto_after_burst", "auto_interval"}) by_trigger[t];
  for (const auto& [trigger, t] : by_trigger) {
    e.Counter("rsslab_trims_by_trigger_total",
              "Trims run, by trigger (manual, phase, auto_after_burst, auto_interval).", t.count,
              {{"trigger", trigger}});
  }
  for (const auto& [trigger, t] : by_trigger) {
    e.Counter("rsslab_trim_freed_bytes_total",
              "RSS given back by trims (before - after, counted when positive), by trigger.",
              t.freed_bytes, {{"trigger", trigger}});
  }
  for (const auto& [trigger, t] : by_trigger) {
    e.Counter("rsslab_trim_duration_seconds_total",
              "Time spent trimming (global release + per-thread pass), by trigger.",
              absl::ToDoubleSeconds(t.duration), {{"trigger", trigger}});
  }
  for (const auto& [trigger, t] : by_trigger) {
    e.Counter("rsslab_trim_worker_pause_seconds_total",
              "Sum over trims of the longest time one worker spent in its release, by trigger.",
              absl::ToDoubleSeconds(t.worker_pause), {{"trigger", trigger}});
  }
  if (s.has_last_trim()) {
    const rsslab::v1::TrimResult& t = s.last_trim();
    e.Gauge("rsslab_last_trim_info", "The last trim's trigger and allocator.", int64_t{1},
            {{"trigger", t.trigger()}, {"allocator", t.allocator()}});
    e.Gauge("rsslab_last_trim_duration_seconds",
            "Duration of the last trim (global release + per-thread pass).",
            static_cast<double>(t.trim_duration_us() + t.per_thread_duration_us()) / 1e6);
    e.Gauge("rsslab_last_trim_max_worker_pause_seconds",
            "Longest time one worker spent in the last trim's per-thread release.",
            static_cast<double>(t.max_worker_pause_us()) / 1e6);
    e.Gauge("rsslab_last_trim_freed_bytes", "RSS the last trim gave back (before - after).",
            t.freed_bytes());
    e.Gauge("rsslab_last_trim_timestamp_seconds", "When the last trim ran (Unix time).",
            static_cast<double>(t.unix_nanos()) / 1e9);
  }
  e.Gauge("rsslab_snapshot_duration_seconds", "Time this scrape's snapshot took.",
          static_cast<double>(s.snapshot_duration_us()) / 1e6);
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
