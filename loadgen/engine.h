// The load engine: drives Load.Handle (or any unary method of the user's
// service, through the generic stub: proto_call.h) in a closed or an open
// loop.
//
//   rsslab::LoadEngine engine({.target = "127.0.0.1:50051"});
//   rsslab::StopFlag stop;                  // Stop() from a signal thread
//   rsslab::LoadResult r = engine.Run(resolved_spec, "fill", &stop);
//   if (!r.status.ok()) ...;                // r.summary is filled either way
//
// Closed loop: `concurrency` RPCs in flight, spread round-robin over
// `channels` separate HTTP/2 connections; each completion issues the next.
// Open loop: requests leave on a schedule (`rate`, constant or Poisson
// arrivals) whatever the server does, and each latency is measured from the
// request's *intended* send time, so a stalled server shows in the
// percentiles instead of silently slowing the generator (coordinated
// omission). Sends that leave later than intended are counted.
//
// Uses gRPC's callback API (closed loop) or its async CompletionQueue API
// (open loop, or --client_api=cq; as gRPC's own qps client does): no thread
// per RPC; completions record into one histogram shard per channel (merged
// at the end), so the generator is not the bottleneck.
#ifndef RSSLAB_LOADGEN_ENGINE_H_
#define RSSLAB_LOADGEN_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "loadgen/results/histogram.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/proto_call.h"
#include "loadgen/status_code.h"
#include "proto/results.pb.h"
#include "proto/scenario.pb.h"
#include "common/auth.h"

namespace rsslab {

// A one-way "stop now" shared by the signal handler thread and the engine.
class StopFlag {
 public:
  void Stop() {
    if (!n_.HasBeenNotified()) n_.Notify();
  }
  bool stopped() const { return n_.HasBeenNotified(); }
  // Sleeps up to `d`; true when stopped meanwhile.
  bool WaitFor(absl::Duration d) const {
    return n_.WaitForNotificationWithTimeout(d);
  }

 private:
  absl::Notification n_;
};

// What a progress line shows while a step runs.
struct LiveProgress {
  bool running = false;
  uint64_t done = 0;    // measured completions
  uint64_t failed = 0;  // of which failed
  uint64_t target = 0;  // measured requests wanted (0 when by duration)
  double p99_us = 0;
  double elapsed_s = 0;  // since measurement began
};

struct LoadResult {
  rsslab::v1::LoadSummary summary;
  Histogram histogram;
  // Latency since the last TakeInterval() when the step ended (the part of
  // the last interval no watch record took).
  rsslab::v1::Latency tail_interval;
  // OK, or why the step failed: unreachable, errors over --max_errors,
  // CANCELLED when interrupted.
  absl::Status status;
};

// What the runner drives for a load step, whatever the call kind: gRPC
// (LoadEngine: unary and streaming calls) or HTTP (loadgen/http). Records,
// summaries, phases, snapshots, soaks and compare sit above it, once.
class LoadDriver {
 public:
  virtual ~LoadDriver() = default;
  // `spec` must be resolved (see ResolveLoad in scenario.h). Blocks until
  // the step ends, fails or `stop` fires; returns only once every request
  // it issued has completed (each has a deadline).
  virtual LoadResult Run(const rsslab::v1::LoadSpec& spec, const std::string& step,
                         const StopFlag* stop) = 0;
  // Thread-safe; for the live progress line.
  virtual LiveProgress Progress() const = 0;
  // Thread-safe: latency of the measured requests completed since the
  // previous call (count 0 when no step runs), then resets that window.
  virtual rsslab::v1::Latency TakeInterval() = 0;
};

class LoadEngine : public LoadDriver {
 public:
  struct Options {
    std::string target = "127.0.0.1:50051";
    // A step fails (and stops sending) once more RPCs than this failed.
    uint64_t max_errors = 0;
    absl::Duration connect_timeout = absl::Seconds(5);
    // A send later than this behind its intended time counts as late.
    absl::Duration late_tolerance = absl::Milliseconds(1);
    // TLS and bearer token for the channels (not owned; null = plaintext).
    const Security* security = nullptr;
    // Completion-queue threads; 0 = one per channel, up to twice the CPUs
    // this process may run on (its affinity mask) but at least 4. Measured
    // pinned to one CPU, 4 channels: one thread per channel beat two threads
    // by ~15% QPS and one thread by 4x (a lone thread waits in Next()
    // while its channels' I/O waits on it).
    int client_threads = 0;
    // Closed loop through gRPC's callback API (completions on gRPC's own
    // threads; calls finished together leave in one write) rather than
    // completion queues. Measured pinned (server CPU 0, client CPU 1):
    // 0.89 x h2load's QPS against 0.76-0.83 with completion queues, and the
    // server spends no more CPU per request than under h2load. The open loop
    // always uses completion queues.
    bool callback_api = true;
    // --metrics_listen: every RPC is counted here too (not owned; may be
    // null).
    LoadgenMetrics* metrics = nullptr;
    // A step whose spec names a `call` sends it through gRPC's generic stub,
    // its requests built from this set's compiled template (not owned; must
    // hold every call the steps name; may be null when none does).
    const CallSet* calls = nullptr;
    // --max_receive_mb: the largest reply message taken, in MiB (1 to
    // kMaxReceiveMbLimit); a larger one fails its call.
    int max_receive_mb = kDefaultMaxReceiveMb;
    // --metadata: sent with every RPC (keys lower-case, values printable).
    std::vector<std::pair<std::string, std::string>> metadata;
  };

  explicit LoadEngine(Options options);
  ~LoadEngine() override;

  LoadResult Run(const rsslab::v1::LoadSpec& spec, const std::string& step,
                 const StopFlag* stop) override;
  LiveProgress Progress() const override;
  rsslab::v1::Latency TakeInterval() override;

  struct RunState;  // shared with in-flight callbacks

 private:
  Options options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<RunState> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_ENGINE_H_
