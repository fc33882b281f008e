#include "loadgen/loadgen_metrics.h"

#include "absl/time/clock.h"
#include "common/metrics/exposition.h"

namespace rsslab {

LoadgenMetrics::LoadgenMetrics() : start_(absl::Now()) {}

void LoadgenMetrics::OnDone(int code, absl::Duration latency, bool warmup) {
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  if (warmup) {
    warmup_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  codes_[code >= 0 && code < kStatusCodes ? code : kStatusCodes].fetch_add(
      1, std::memory_order_relaxed);
  if (code != 0) failed_.fetch_add(1, std::memory_order_relaxed);
  latency_.Observe(latency);
}

void LoadgenMetrics::StepStarted(const std::string& label, const std::string& name,
                                 const std::string& kind, int cycle) {
  absl::MutexLock l(&mu_);
  ++step_seq_;
  step_label_ = label;
  step_name_ = name;
  step_kind_ = kind;
  cycle_ = cycle;
}

void LoadgenMetrics::StepEnded(bool ok) {
  absl::MutexLock l(&mu_);
  ++(ok ? steps_ok_ : steps_failed_);
}

void LoadgenMetrics::ServerSnapshot(const rsslab::v1::Snapshot& snap) {
  if (!snap.has_status()) return;
  absl::MutexLock l(&mu_);
  have_rss_ = true;
  server_rss_ = snap.status().rss_bytes();
  server_threads_ = snap.status().threads();
  rss_at_ = absl::Now();
}

void LoadgenMetrics::RunEnded(bool completed) {
  absl::MutexLock l(&mu_);
  run_state_ = completed ? 1 : 2;
}

std::string LoadgenMetrics::Text() const {
  metrics::Exposition e;
  constexpr char kRequestsHelp[] =
      "Measured requests completed, by gRPC status (warm-up excluded, as in the summaries).";
  // OK always, so a graph starts at 0; other codes once seen.
  for (int c = 0; c <= kStatusCodes; ++c) {
    const uint64_t n = codes_[c].load(std::memory_order_relaxed);
    if (c != 0 && n == 0) continue;
    e.Counter("rsslab_loadgen_requests_total", kRequestsHelp, n,
              {{"code", c < kStatusCodes ? StatusCodeName(c) : "OTHER"}});
  }
  e.Counter("rsslab_loadgen_errors_total", "Measured requests that failed (any non-OK status).",
            failed_.load(std::memory_order_relaxed));
  e.Counter("rsslab_loadgen_warmup_requests_total", "Warm-up requests completed.",
            warmup_.load(std::memory_order_relaxed));
  e.Gauge("rsslab_loadgen_requests_in_flight", "RPCs sent and not yet completed.",
          in_flight_.load(std::memory_order_relaxed));
  e.Histogram("rsslab_loadgen_request_latency_seconds",
              "Measured request latency from the intended send time.", latency_.Read());
  e.Gauge("rsslab_loadgen_start_time_seconds", "When the loadgen started (Unix time).",
          absl::ToDoubleSeconds(start_ - absl::UnixEpoch()));
  absl::MutexLock l(&mu_);
  e.Gauge("rsslab_loadgen_step", "Steps started so far (the running one's number, 1-based).",
          int64_t{step_seq_});
  if (step_seq_ > 0) {
    e.Gauge("rsslab_loadgen_step_info", "The step running (or last run): its label, name, kind.",
            int64_t{1},
            {{"label", step_label_}, {"step", step_name_}, {"kind", step_kind_}});
  }
  e.Gauge("rsslab_loadgen_cycle", "Cycle of the step running (0-based, as in events.jsonl).",
          int64_t{cycle_});
  e.Counter("rsslab_loadgen_steps_total", "Steps ended, by result.", steps_ok_,
            {{"result", "ok"}});
  e.Counter("rsslab_loadgen_steps_total", "Steps ended, by result.", steps_failed_,
            {{"result", "failed"}});
  if (have_rss_) {
    e.Gauge("rsslab_loadgen_server_resident_memory_bytes",
            "The server's RSS in the last snapshot the loadgen received.", server_rss_);
    e.Gauge("rsslab_loadgen_server_threads", "The server's threads in that snapshot.",
            server_threads_);
    e.Gauge("rsslab_loadgen_server_snapshot_time_seconds",
            "When the loadgen received that snapshot (Unix time).",
            absl::ToDoubleSeconds(rss_at_ - absl::UnixEpoch()));
  }
  e.Gauge("rsslab_loadgen_run_finished",
          "0 while the run goes on, 1 once it completed, 2 once it ended in failure or "
          "interrupted.",
          int64_t{run_state_});
  return e.Text();
}

}  // namespace rsslab
