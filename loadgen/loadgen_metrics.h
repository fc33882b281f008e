// The loadgen's own progress as Prometheus metrics (--metrics_listen), for
// runs long enough that someone graphs them: requests by gRPC status,
// errors, RPCs in flight, the latency histogram, the step and cycle
// running, and the last server RSS the loadgen saw. Rendered with the
// server's exposition code (//common/metrics) and served by the same HTTP
// endpoint.
//
// The engine calls OnSend/OnDone from its poller threads (relaxed atomics
// only, no lock); the runner calls the rest. Counts are of measured
// requests, as in the run's load summaries, so at the end
// sum(rsslab_loadgen_requests_total) equals the summary's `requests`.
//
// Example:
//   LoadgenMetrics m;
//   auto http = metrics::MetricsHttpServer::Start("127.0.0.1:9465",
//                                                 [&m] { return m.Text(); });
//   runner_options.metrics = &m;

#ifndef RSSLAB_LOADGEN_LOADGEN_METRICS_H_
#define RSSLAB_LOADGEN_LOADGEN_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "loadgen/status_code.h"
#include "proto/snapshot.pb.h"
#include "common/metrics/latency_histogram.h"

namespace rsslab {

class LoadgenMetrics {
 public:
  LoadgenMetrics();

  // An RPC left (warm-up included).
  void OnSend() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  // An RPC completed with `code`; `latency` from its intended send time.
  // Warm-up RPCs count only as warm-up, like in the summaries.
  void OnDone(int code, absl::Duration latency, bool warmup);

  // `label` is the progress label ("3/9", "2/4 cycle 3: 1/4"); `cycle` as
  // in events.jsonl (0-based).
  void StepStarted(const std::string& label, const std::string& name, const std::string& kind,
                   int cycle);
  void StepEnded(bool ok);
  // Any snapshot the loadgen received (phase, snapshot, trim, watch, the
  // live line's).
  void ServerSnapshot(const rsslab::v1::Snapshot& snap);
  void RunEnded(bool completed);

  std::string Text() const;

 private:
  const absl::Time start_;
  std::array<std::atomic<uint64_t>, kStatusCodes + 1> codes_{};  // last: other
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> warmup_{0};
  std::atomic<int64_t> in_flight_{0};
  metrics::LatencyHistogram latency_;

  mutable absl::Mutex mu_;
  int step_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::string step_label_ ABSL_GUARDED_BY(mu_);
  std::string step_name_ ABSL_GUARDED_BY(mu_);
  std::string step_kind_ ABSL_GUARDED_BY(mu_);
  int cycle_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t steps_ok_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t steps_failed_ ABSL_GUARDED_BY(mu_) = 0;
  bool have_rss_ ABSL_GUARDED_BY(mu_) = false;
  int64_t server_rss_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t server_threads_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time rss_at_ ABSL_GUARDED_BY(mu_);
  int run_state_ ABSL_GUARDED_BY(mu_) = 0;  // 0 running, 1 completed, 2 failed
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_LOADGEN_METRICS_H_
