// How an accepted Load call reaches its answer: the one seam between the
// core's bookkeeping (phase, in-flight count) and what runs the call.
//
// The product is the Python dispatcher in core.cc (a worker holding the GIL
// runs the handler), used unless ServerCore::Options::dispatcher names
// another. A caller that wants another one (the benchmark server in
// bench/dispatch/) supplies a factory, so the product knows no other mode:
//
//   ServerCore::Options o;
//   o.dispatcher = DispatcherFactory{
//       "inline", [](const DispatchContext& ctx) -> std::unique_ptr<Dispatcher> {
//         return std::make_unique<MyDispatcher>(ctx.phase);
//       }};

#ifndef RSSLAB_SERVER_DISPATCH_H_
#define RSSLAB_SERVER_DISPATCH_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/load.pb.h"
#include "common/metrics/latency_histogram.h"
#include "server/phase_state.h"
#include "server/workers/worker_pool.h"

namespace rsslab {

// One accepted call, not yet answered.
struct PendingCall {
  const rsslab::v1::HandleRequest* request = nullptr;
  rsslab::v1::HandleResponse* response = nullptr;
  std::function<bool()> cancelled;
  // Called exactly once, with the call's outcome.
  std::function<void(const absl::Status&)> done;
  absl::Time queued;
};

// Accepted calls in arrival order, for dispatchers that hand calls to the
// worker pool: one pool task per call, and whichever worker runs a task
// serves the oldest call then, so calls are served in arrival order
// whichever worker wakes first.
//
//   void Dispatch(PendingCall call) override {
//     queue_.Enqueue(workers_, std::move(call), [this](int w) { Serve(w); });
//   }
//   void Serve(int worker) { PendingCall p = queue_.PopOldest(); ... }
class PendingQueue {
 public:
  // Queues `call` and submits `serve_oldest` to `workers`. Once the pool
  // has stopped, every later Submit fails too, and each failing call
  // answers one queued call (the newest) UNAVAILABLE.
  void Enqueue(WorkerPool* workers, PendingCall call, std::function<void(int)> serve_oldest);
  // The oldest queued call; one task per call, so there is always one.
  PendingCall PopOldest();

 private:
  absl::Mutex mu_;
  std::deque<PendingCall> pending_ ABSL_GUARDED_BY(mu_);
};

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  // Answers `call` (call.done) exactly once, now or later, on any thread.
  virtual void Dispatch(PendingCall call) = 0;
};

// What every dispatcher does once a call ran (or was skipped): the timing
// fields of the response, the handler-latency histogram, the phase's
// served/error counters, then call.done(status).
struct Served {
  PhaseState* phase;
  metrics::LatencyHistogram* latency;
  void operator()(PendingCall& call, int worker, absl::Time start, absl::Time end,
                  const absl::Status& status) const {
    call.response->set_worker(worker);
    call.response->set_handler_us(absl::ToInt64Microseconds(end - start));
    latency->Observe(end - start);
    call.response->set_queue_us(absl::ToInt64Microseconds(start - call.queued));
    phase->CountServed(!status.ok());
    call.done(status);
  }
};

// What ServerCore::Create hands a DispatcherFactory: the worker pool
// (started, each thread attached to the interpreter), the phase counters and
// the bookkeeping of an answered call. All outlive the dispatcher.
struct DispatchContext {
  WorkerPool* workers;
  PhaseState* phase;
  Served served;
};

// A dispatcher other than the Python handler's (ServerCore::Options).
struct DispatcherFactory {
  // What snapshots report in config.dispatch (the product's is "python").
  std::string name;
  std::function<std::unique_ptr<Dispatcher>(const DispatchContext&)> make;
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_DISPATCH_H_
