// The h2c engine: one thread's requests through a libcurl multi handle (HTTP/2
// over nghttp2), multiplexed over the thread's connections; closed or open
// loop as HttpEngine::Run sets it up (http_run.h).
//
//   InitCurl();
//   RunCurlWorker(&run_state, {.index = 0, .threads = 1, .conns = 2, .slots = 64, .t0 = t0},
//                 stop, &sends);
#ifndef RSSLAB_LOADGEN_HTTP_CURL_WORKER_H_
#define RSSLAB_LOADGEN_HTTP_CURL_WORKER_H_

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "loadgen/engine.h"
#include "loadgen/http/http_run.h"
#include "loadgen/http/http_target.h"

namespace rsslab {
namespace http {

// curl_global_init, once per process.
void InitCurl();

// Runs one thread's share of the step until it is done.
void RunCurlWorker(RunState* st, const WorkerArgs& args, const StopFlag* stop, Sends* sends);

// The server accepts connections (retried until `timeout`, as gRPC's
// WaitForConnected waits for a server still starting).
absl::Status WaitConnectable(const Target& t, absl::Duration timeout);

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_CURL_WORKER_H_
