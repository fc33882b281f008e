#include "bench/dispatch/bench_dispatch.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/dispatch.h"

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

absl::Status UseBenchDispatch(const std::string& mode, ServerCore::Options* options) {
  if (mode == "python") {
    options->dispatcher.reset();
  } else if (mode == "pool") {
    options->dispatcher = DispatcherFactory{"pool", [](const DispatchContext& ctx) {
                                              return std::unique_ptr<Dispatcher>(
                                                  new PoolDispatcher(ctx.workers, ctx.served));
                                            }};
  } else if (mode == "inline") {
    options->dispatcher = DispatcherFactory{"inline", [](const DispatchContext& ctx) {
                                              return std::unique_ptr<Dispatcher>(
                                                  new InlineDispatcher(ctx.phase));
                                            }};
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--dispatch must be python, pool or inline, got '", mode, "'"));
  }
  return absl::OkStatus();
}

}  // namespace rsslab
