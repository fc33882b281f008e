// What every call kind (gRPC unary and streaming: engine.cc; HTTP:
// loadgen/http) counts for one load step, once: which request comes next
// and whether it is warm-up, the step's end, failures against --max_errors
// with the first one's text, and the summary fields they make.
//
//   struct MyRun : rsslab::StepCounts { ... };   // a call kind's run state
//   uint64_t idx; bool warm;
//   if (run.Take(intended_ns, &idx, &warm)) { /* send request idx */ }
//   ...  // on completion, after recording its latency in a histogram shard:
//   run.Finish(ok, warm, MonoNs(), [&] { return error_text; });
//   run.Summarize(merged_histogram, cpu_s, sends, "RPCs", &result);
#ifndef RSSLAB_LOADGEN_STEP_COUNTS_H_
#define RSSLAB_LOADGEN_STEP_COUNTS_H_

#include <time.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "loadgen/engine.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/results/histogram.h"
#include "proto/scenario.pb.h"

namespace rsslab {

inline int64_t StepMonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// How the sends kept to their schedule (open loop), and whether a stop
// request cut the step short.
struct Sends {
  uint64_t late = 0;
  // Due before the step's end but not sent when its time was up.
  uint64_t not_sent = 0;
  int64_t max_lag_ns = 0;
  bool interrupted = false;
};

struct StepCounts {
  rsslab::v1::LoadSpec spec;
  uint64_t max_errors = 0;
  LoadgenMetrics* metrics = nullptr;  // not owned; may be null

  int64_t warmup_end_ns = 0;  // sends intended before this are warm-up
  int64_t measure_end_ns = std::numeric_limits<int64_t>::max();

  std::atomic<uint64_t> next_index{0};
  std::atomic<uint64_t> measured_issued{0};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> failed{0};      // measured
  std::atomic<uint64_t> failed_all{0};  // including warm-up
  std::atomic<uint64_t> warm_done{0};
  std::atomic<int64_t> measure_start_ns{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> last_done_ns{0};

  // Taken briefly on every failure (and by the gRPC engine whenever its
  // in-flight count drops, so waiters re-check).
  absl::Mutex mu;
  std::string first_error ABSL_GUARDED_BY(mu);
  bool too_many_errors ABSL_GUARDED_BY(mu) = false;

  // The next request index if the step wants another request (counted as
  // sent for --metrics_listen); false once it wants no more.
  bool Take(int64_t intended_ns, uint64_t* idx, bool* warm) {
    if (stopping.load(std::memory_order_relaxed)) return false;
    if (intended_ns >= measure_end_ns) {
      stopping = true;
      return false;
    }
    *idx = next_index.fetch_add(1);
    *warm = *idx < spec.warmup_requests() || intended_ns < warmup_end_ns;
    if (!*warm) {
      if (spec.requests() > 0 && measured_issued.fetch_add(1) >= spec.requests()) {
        stopping = true;
        return false;
      }
      int64_t cur = measure_start_ns.load();
      while (intended_ns < cur && !measure_start_ns.compare_exchange_weak(cur, intended_ns)) {
      }
    }
    if (metrics != nullptr) metrics->OnSend();
    return true;
  }

  // One finished request (its latency already recorded by the caller):
  // counted, and a failure against --max_errors; `error` gives its text,
  // called only for the step's first failure.
  void Finish(bool ok, bool warm, int64_t end_ns, absl::FunctionRef<std::string()> error) {
    if (!ok) {
      const uint64_t n = failed_all.fetch_add(1) + 1;
      if (!warm) failed.fetch_add(1);
      absl::MutexLock l(&mu);
      if (first_error.empty()) first_error = error();
      if (n > max_errors) {
        too_many_errors = true;
        stopping = true;
      }
    }
    if (warm) {
      warm_done.fetch_add(1);
      return;
    }
    done.fetch_add(1);
    int64_t cur = last_done_ns.load();
    while (end_ns > cur && !last_done_ns.compare_exchange_weak(cur, end_ns)) {
    }
  }

  // The live progress line's figures; `merged` is the step's histogram so far.
  LiveProgress Progress(const Histogram& merged) const {
    LiveProgress p;
    p.running = true;
    p.done = done.load();
    p.failed = failed.load();
    p.target = spec.requests();
    p.p99_us = merged.Percentile(99) / 1e3;
    const int64_t start = measure_start_ns.load();
    const int64_t now = StepMonoNs();
    p.elapsed_s = start < now ? (now - start) / 1e9 : 0;
    return p;
  }

  // The summary fields every call kind fills alike, from the drained step
  // (`hist`: its merged histogram; `what`: "RPCs" or "requests", in the
  // too-many-errors text), and the step's status.
  void Summarize(const Histogram& hist, double cpu, const Sends& sends, absl::string_view what,
                 LoadResult* result) {
    auto& sum = result->summary;
    result->histogram = hist;
    const uint64_t n = done.load();
    const uint64_t bad = failed.load();
    sum.set_requests_ok(n - bad);
    sum.set_requests_failed(bad);
    sum.set_warmup_requests(warm_done.load());
    const int64_t ms = measure_start_ns.load();
    const int64_t me = last_done_ns.load();
    const double elapsed = (n > 0 && me > ms) ? (me - ms) / 1e9 : 0;
    sum.set_elapsed_s(elapsed);
    sum.set_qps(elapsed > 0 ? n / elapsed : 0);
    *sum.mutable_latency() = hist.LatencyMicros();
    sum.set_client_cpu_s(cpu);
    sum.set_requests_per_client_cpu_s(cpu > 0 ? n / cpu : 0);
    sum.set_behind_schedule(sends.late);
    sum.set_not_sent(sends.not_sent);
    sum.set_max_schedule_lag_us(sends.max_lag_ns / 1e3);
    *sum.mutable_histogram() = hist.ToProto();
    sum.set_interrupted(sends.interrupted);
    sum.set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
    absl::MutexLock l(&mu);
    sum.set_first_error(first_error);
    if (too_many_errors) {
      result->status = absl::AbortedError(
          absl::StrFormat("%d %s failed (more than --max_errors=%d); first: %s",
                          failed_all.load(), what, max_errors, first_error));
    } else if (sends.interrupted) {
      result->status = absl::CancelledError("interrupted");
    } else if (spec.requests() > 0 && n < spec.requests()) {
      result->status = absl::InternalError(
          absl::StrFormat("only %d of %d requests completed", n, spec.requests()));
    }
  }
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_STEP_COUNTS_H_
