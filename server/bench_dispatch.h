// The benchmark modes of --dispatch (bench/dispatch_cost.sh), never for
// real serving. Their CPU differences split a request's cost into gRPC
// (inline), the hand-off to a worker thread (pool - inline) and the GIL +
// Python call (python - pool):
//   inline  answered on the thread that accepted the call, no worker
//   pool    handed to a worker, which answers without entering Python
//
//   std::unique_ptr<Dispatcher> d = MakeBenchDispatcher(
//       ServerCore::Options::Dispatch::kPool, workers, served);

#ifndef RSSLAB_SERVER_BENCH_DISPATCH_H_
#define RSSLAB_SERVER_BENCH_DISPATCH_H_

#include <memory>

#include "server/dispatch.h"
#include "server/workers/worker_pool.h"

namespace rsslab {

std::unique_ptr<Dispatcher> MakeInlineDispatcher(PhaseState* phase);
std::unique_ptr<Dispatcher> MakePoolDispatcher(WorkerPool* workers, Served served);

}  // namespace rsslab

#endif  // RSSLAB_SERVER_BENCH_DISPATCH_H_
