// The benchmark modes of rsslab_bench_server --dispatch
// (bench/dispatch_cost.sh), never for real serving. Their CPU differences
// split a request's cost into gRPC (inline), the hand-off to a worker thread
// (pool - inline) and the GIL + Python call (python - pool):
//   inline  answered on the thread that accepted the call, no worker
//   pool    handed to a worker, which answers without entering Python
//   python  the product's own dispatcher (ServerCore's default)
//
//   ServerCore::Options o;
//   absl::Status s = UseBenchDispatch("pool", &o);  // o.dispatcher is set

#ifndef RSSLAB_BENCH_DISPATCH_BENCH_DISPATCH_H_
#define RSSLAB_BENCH_DISPATCH_BENCH_DISPATCH_H_

#include <string>

#include "absl/status/status.h"
#include "server/core.h"

namespace rsslab {

// Sets options->dispatcher for `mode` ("python" leaves the product's);
// INVALID_ARGUMENT naming --dispatch for anything else.
absl::Status UseBenchDispatch(const std::string& mode, ServerCore::Options* options);

}  // namespace rsslab

#endif  // RSSLAB_BENCH_DISPATCH_BENCH_DISPATCH_H_
