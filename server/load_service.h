// The data plane (rsslab.v1.Load) over gRPC's completion-queue API, driven
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

#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/load.grpc.pb.h"
#include "common/auth.h"
#include "server/core.h"

namespace rsslab {

class LoadService {
 public:
  // `security` checks the caller's token (when one is configured).
  LoadService(ServerCore* core, const Security* security) : core_(core), security_(security) {}
  ~LoadService();  // Stop()

  // What to register with the ServerBuilder.
  grpc::Service* service() { return &service_; }
  // After BuildAndStart: accepts calls on `cq` (from the same builder's
  // AddCompletionQueue) on the `rsslab-io` thread.
  void Start(std::unique_ptr<grpc::ServerCompletionQueue> cq);
  // Collects the calls that have been answered and are done (without
  // blocking; a no-op when another thread is at it). Called by the workers
  // after each answer and by the io thread when it wakes.
  void Reap();
  // After the server's Shutdown() (which answers or cancels every call):
  // shuts the queue down, drains it and joins the thread. Idempotent.
  void Stop();

 private:
  struct Call;
  void Accept();  // primes one call slot
  void Loop();
  void ReapOne(void* tag) ABSL_EXCLUSIVE_LOCKS_REQUIRED(reap_mu_);

  ServerCore* const core_;
  const Security* const security_;
  // Raw Handle: LoadService parses the request itself (see Call).
  rsslab::v1::Load::WithRawMethod_Handle<rsslab::v1::Load::AsyncService> service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  // Where answered calls report back (their finish and done tags). Nobody
  // waits on it, so an answer wakes no thread: the io thread would otherwise
  // be woken once or twice per call just to free it.
  grpc::CompletionQueue reap_cq_;
  absl::Mutex reap_mu_;
  std::thread io_;
  // Priming a slot must not race with shutting the queue down.
  absl::Mutex accept_mu_;
  bool stopping_ ABSL_GUARDED_BY(accept_mu_) = false;
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_LOAD_SERVICE_H_
