// The h2c engine: one thread's requests on nghttp2's session API over Asio
// sockets (HTTP/2 with prior knowledge), multiplexed over the thread's
// connections, the requests in flight spread evenly. Closed or open loop as
// HttpEngine::Run sets it up (http_run.h).
//
//   RunH2Worker(&run_state, {.index = 0, .threads = 1, .conns = 2, .slots = 64, .t0 = t0},
//               stop, &sends);
//
// A connection the server ends (GOAWAY, as nginx does after
// keepalive_requests) is replaced by a new one; the requests it refused
// (above its last stream) are sent again, once. Redirects
// (--follow_redirects) as on HTTP/1.1 (h1_worker.h).
#ifndef RSSLAB_LOADGEN_HTTP_H2_WORKER_H_
#define RSSLAB_LOADGEN_HTTP_H2_WORKER_H_

#include "loadgen/engine.h"
#include "loadgen/http/http_run.h"

namespace rsslab {
namespace http {

// Runs one thread's share of the step until it is done.
void RunH2Worker(RunState* st, const WorkerArgs& args, const StopFlag* stop, Sends* sends);

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_H2_WORKER_H_
