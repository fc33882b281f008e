#include "memory/snapshot/snapshot_metrics.h"

#include "absl/time/time.h"
#include "common/metrics/process_gauges.h"

namespace rsslab {
namespace metrics {

void AppendMemoryMetrics(const rsslab::v1::Snapshot& s, Exposition* e) {
  // The process gauges every exporter shares (inspect's too): one home.
  ProcessGauges(s.status(), s.memory_map(), s.allocator(), s.allocator_library(), e);
  e->Gauge("rsslab_uptime_seconds", "Seconds since the server started.", s.uptime_s());

  const Labels alloc = {{"allocator", s.allocator()}};
  const rsslab::v1::AllocatorStats& as = s.allocator_stats();
  // Only what the loaded allocator reports: a missing series is honest, a
  // zero would read as "nothing resident".
  if (as.allocated_bytes() > 0) {
    e->Gauge("rsslab_allocator_allocated_bytes", "Bytes in use according to the allocator.",
            as.allocated_bytes(), alloc);
  }
  if (as.resident_bytes() > 0) {
    e->Gauge("rsslab_allocator_resident_bytes", "Resident bytes according to the allocator.",
            as.resident_bytes(), alloc);
  }
  if (as.has_jemalloc() && as.jemalloc().active() > 0) {
    e->Gauge("rsslab_allocator_active_bytes", "jemalloc stats.active: bytes in active pages.",
            as.jemalloc().active(), alloc);
  }

  const rsslab::v1::CacheStats& c = s.cache();
  e->Gauge("rsslab_cache_bytes", "Bytes held by the LRU cache.", c.cache_bytes());
  e->Gauge("rsslab_cache_entries", "Entries in the LRU cache.", c.cache_entries());
  e->Gauge("rsslab_cache_limit_bytes", "The LRU cache's byte limit.", c.cache_limit_bytes());
  e->Counter("rsslab_cache_evictions_total", "Entries evicted from the LRU cache.", c.evictions());
  e->Counter("rsslab_cache_hits_total", "LRU cache hits.", c.hits());
  e->Counter("rsslab_cache_misses_total", "LRU cache misses.", c.misses());
}

void AppendTrimMetrics(const rsslab::v1::Snapshot& s,
                       const std::map<std::string, Trimmer::TriggerTotals>& trims,
                       Exposition* e) {
  e->Counter("rsslab_trims_total", "Trims run (phase, manual and automatic).", s.trims_total());
  e->Counter("rsslab_auto_trims_total", "Trims run by the automatic policy (--auto_trim).",
            s.auto_trims_total());
  // Every trigger always has a series (0 until it fires), so rate() and
  // alerts work from the first scrape.
  std::map<std::string, Trimmer::TriggerTotals> by_trigger = trims;
  for (const char* t : {"manual", "phase", "auto_after_burst", "auto_interval"}) by_trigger[t];
  for (const auto& [trigger, t] : by_trigger) {
    e->Counter("rsslab_trims_by_trigger_total",
              "Trims run, by trigger (manual, phase, auto_after_burst, auto_interval).", t.count,
              {{"trigger", trigger}});
  }
  for (const auto& [trigger, t] : by_trigger) {
    e->Counter("rsslab_trim_freed_bytes_total",
              "RSS given back by trims (before - after, counted when positive), by trigger.",
              t.freed_bytes, {{"trigger", trigger}});
  }
  for (const auto& [trigger, t] : by_trigger) {
    e->Counter("rsslab_trim_duration_seconds_total",
              "Time spent trimming (global release + per-thread pass), by trigger.",
              absl::ToDoubleSeconds(t.duration), {{"trigger", trigger}});
  }
  for (const auto& [trigger, t] : by_trigger) {
    e->Counter("rsslab_trim_worker_pause_seconds_total",
              "Sum over trims of the longest time one worker spent in its release, by trigger.",
              absl::ToDoubleSeconds(t.worker_pause), {{"trigger", trigger}});
  }
  if (s.has_last_trim()) {
    const rsslab::v1::TrimResult& t = s.last_trim();
    e->Gauge("rsslab_last_trim_info", "The last trim's trigger and allocator.", int64_t{1},
            {{"trigger", t.trigger()}, {"allocator", t.allocator()}});
    e->Gauge("rsslab_last_trim_duration_seconds",
            "Duration of the last trim (global release + per-thread pass).",
            static_cast<double>(t.trim_duration_us() + t.per_thread_duration_us()) / 1e6);
    e->Gauge("rsslab_last_trim_max_worker_pause_seconds",
            "Longest time one worker spent in the last trim's per-thread release.",
            static_cast<double>(t.max_worker_pause_us()) / 1e6);
    e->Gauge("rsslab_last_trim_freed_bytes", "RSS the last trim gave back (before - after).",
            t.freed_bytes());
    e->Gauge("rsslab_last_trim_timestamp_seconds", "When the last trim ran (Unix time).",
            static_cast<double>(t.unix_nanos()) / 1e9);
  }
  e->Gauge("rsslab_snapshot_duration_seconds", "Time this scrape's snapshot took.",
          static_cast<double>(s.snapshot_duration_us()) / 1e6);
}

}  // namespace metrics
}  // namespace rsslab
