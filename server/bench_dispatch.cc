#include "server/bench_dispatch.h"

#include <utility>


namespace rsslab {
namespace {

// What gRPC alone costs, plus the phase and in-flight bookkeeping every
// mode pays.
class InlineDispatcher : public Dispatcher {
 public:
  explicit InlineDispatcher(PhaseState* phase) : phase_(phase) {}
  void Dispatch(PendingCall call) override {
    call.response->set_id(call.request->id());
    phase_->CountServed(false);
    call.done(absl::OkStatus());
  }

 private:
  PhaseState* const phase_;
};

// The product's hand-off (a queue, one pool task per call, the oldest call
// taken by whichever worker runs) without the GIL or the handler.
class PoolDispatcher : public Dispatcher {
 public:
  PoolDispatcher(WorkerPool* workers, Served served) : workers_(workers), served_(served) {}
  void Dispatch(PendingCall call) override {
    queue_.Enqueue(workers_, std::move(call), [this](int worker) { ServeOldest(worker); });
  }

 private:
  void ServeOldest(int worker) {
    PendingCall p = queue_.PopOldest();
    absl::Time start = absl::Now();
    if (p.cancelled && p.cancelled()) {
      p.done(absl::CancelledError("client cancelled before a worker was free"));
      return;
    }
    p.response->set_id(p.request->id());
    served_(p, worker, start, absl::Now(), absl::OkStatus());
  }

  WorkerPool* const workers_;
  const Served served_;
  PendingQueue queue_;
};

}  // namespace

std::unique_ptr<Dispatcher> MakeInlineDispatcher(PhaseState* phase) {
  return std::make_unique<InlineDispatcher>(phase);
}

std::unique_ptr<Dispatcher> MakePoolDispatcher(WorkerPool* workers, Served served) {
  return std::make_unique<PoolDispatcher>(workers, served);
}

}  // namespace rsslab
