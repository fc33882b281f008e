// How an accepted Load call reaches its answer: the one seam between the
// core's bookkeeping (phase, in-flight count) and what runs the call.
//
// The product is the Python dispatcher in core.cc (a worker holding the GIL
// runs the handler). The benchmark modes of --dispatch (pool, inline;
// bench/dispatch_cost.sh) live in bench_dispatch.cc behind the same
// interface, so the product's hot path has no branches for them.

#ifndef RSSLAB_SERVER_DISPATCH_H_
#define RSSLAB_SERVER_DISPATCH_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/load.pb.h"
#include "common/metrics/latency_histogram.h"
#include "server/phase_state.h"

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

}  // namespace rsslab

#endif  // RSSLAB_SERVER_DISPATCH_H_
