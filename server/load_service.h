// The data plane (rsslab.v1.Load: Handle, HandleStream) over gRPC's completion-queue API, driven
// by one thread of ours, `rsslab-io`: it takes each call off the queue,
// hands it to the core (which runs the handler on a worker), and cleans up
// when the answer has gone out. gRPC's threads never run Python.
//
// Why not the callback API: with it, gRPC 1.51 runs every completion on its
// own "nexting" threads (at least two), which take turns polling, so each
// request woke them ~5 times, and on a CPU shared with the worker each wake
// preempted the handler (docs/BENCHMARKS.md, "Seed overhead"). Here one
// thread polls: while requests keep coming it stays awake and drains the
// queue, and the worker's Finish() writes the response itself.
//
// Example (main.cc):
//   LoadService load(core, &security);
//   grpc::ServerBuilder b;
//   b.RegisterService(load.service());
//   auto cq = b.AddCompletionQueue();
//   auto server = b.BuildAndStart();
//   load.Start(std::move(cq));
//   ...
//   server->Shutdown();
//   load.Stop();   // after the server's Shutdown: drains the queue, joins

#ifndef RSSLAB_SERVER_LOAD_SERVICE_H_
#define RSSLAB_SERVER_LOAD_SERVICE_H_

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "proto/load.grpc.pb.h"
#include "common/auth.h"
#include "server/core.h"

namespace rsslab {

class LoadService {
 public:
  // `security` checks the caller's token (when one is configured).
  LoadService(ServerCore* core, const Security* security)
      : core_(core), security_(security), generic_mode_(security->has_token()) {}
  ~LoadService();  // Stop()

  // Registers the service with the builder: the raw Handle method, or with
  // a token the generic service (see generic_).
  void Register(grpc::ServerBuilder* builder);
  // After BuildAndStart: accepts calls on `cq` (from the same builder's
  // AddCompletionQueue) on the `rsslab-io` thread.
  void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq);
  // Collects the calls that have been answered and are done (without
  // blocking; a no-op when another thread is at it). Called by the io
  // thread only (see reap_cq_).
  void Reap();
  // After the server's Shutdown() (which answers or cancels every call):
  // shuts the queue down, drains it and joins the thread. Idempotent.
  void Stop();

 private:
  struct Call;
  void Accept(bool streaming);  // primes one call slot (HandleStream: raw mode only)
  void Loop();
  // The call's request bytes are in raw_request: parse, run, answer.
  void Serve(Call* c);
  void FinishWithError(Call* c, const grpc::Status& status);
  // A HandleStream call's operations, started only while the queue is up
  // (false, and the call marked over, once Stop() has shut it down).
  bool StartStreamOp(Call* c, const std::function<void()>& start);
  void FinishStream(Call* c, const grpc::Status& status);
  void ReadStream(Call* c);
  void ReapOne(void* tag) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reap_mu_);
  // A call's state lives in storage that is recycled, never freed while
  // serving (see calls_free_).
  Call* NewCall(bool streaming);
  void FreeCall(Call* c);

  ServerCore* const core_;
  const Security* const security_;
  // Raw Handle and HandleStream: LoadService parses the requests itself
  // (see Call).
  rsslab::v1::Load::WithRawMethod_HandleStream<
      rsslab::v1::Load::WithRawMethod_Handle<rsslab::v1::Load::AsyncService>>
      service_;
  // With a token: calls arrive after their metadata only, and the request
  // is read once the token has been checked. gRPC 1.51 buffers a whole
  // message before its size limit applies, so with the raw method an
  // unauthenticated client's 1,000 MiB request was read in full before
  // being refused. Costs one more completion per call (the read), so it is
  // used only where there is a token to check.
  const bool generic_mode_;
  grpc::AsyncGenericService generic_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  // Where answered calls report back (their finish and done tags). Nobody
  // waits on it, so an answer wakes no thread: the io thread would otherwise
  // be woken once or twice per call just to free it. It drains it each time
  // it wakes (each new call, or kIdleReap after the last event): only the
  // io thread frees a call. gRPC allocates each call's arena (8-16 KiB, the
  // size class of many handler bodies) and a smaller block on the io
  // thread; when the worker that answered freed them, under mimalloc 3.x
  // every full page of them was abandoned, then reclaimed by the worker on
  // its first free there, and filled with its cached bodies: the host held
  // 10-25 MiB more than a plain Python process at 1 worker
  // (docs/TRIM.md, "mimalloc 3: what the host itself allocated").
  grpc::CompletionQueue reap_cq_;
  static constexpr std::chrono::milliseconds kIdleReap{100};
  absl::Mutex reap_mu_;
  std::thread io_;
  // Priming a slot must not race with shutting the queue down.
  absl::Mutex accept_mu_;
  bool stopping_ ABSL_GUARDED_BY(accept_mu_) = false;
  // Storage of finished calls, reused for the next ones: at most as many
  // blocks as calls were ever in flight at once. A Call is about 4 KiB, the
  // size class of the handler's median body. Allocated per request on the
  // io thread and freed on the workers, under mimalloc 3.x every full page
  // of them was abandoned at once and reclaimed by the worker whose free
  // found it, which then filled it with bodies the cache kept: 1.5-3x the
  // RSS of the same workload in a plain Python process (docs/TRIM.md,
  // "mimalloc 3: the host's own allocations").
  absl::Mutex calls_mu_;
  std::vector<void*> calls_free_ ABSL_GUARDED_BY(calls_mu_);
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_LOAD_SERVICE_H_
