#include "server/bench_dispatch.h"

#include <deque>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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
    {
      absl::MutexLock lock(&mu_);
      pending_.push_back(std::move(call));
    }
    if (workers_->Submit([this](int worker) { ServeOldest(worker); })) return;
    PendingCall p;
    {
      absl::MutexLock lock(&mu_);
      // Stop() has begun: every later Submit fails too and takes one each.
      p = std::move(pending_.back());
      pending_.pop_back();
    }
    p.done(absl::UnavailableError("server is shutting down"));
  }

 private:
  void ServeOldest(int worker) {
    PendingCall p;
    {
      absl::MutexLock lock(&mu_);
      p = std::move(pending_.front());
      pending_.pop_front();
    }
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
  absl::Mutex mu_;
  std::deque<PendingCall> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Dispatcher> MakeInlineDispatcher(PhaseState* phase) {
  return std::make_unique<InlineDispatcher>(phase);
}

std::unique_ptr<Dispatcher> MakePoolDispatcher(WorkerPool* workers, Served served) {
  return std::make_unique<PoolDispatcher>(workers, served);
}

}  // namespace rsslab
