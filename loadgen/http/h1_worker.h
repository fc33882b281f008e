// The HTTP/1.1 engine: one thread's requests on Boost.Beast over Asio, one
// io_context per thread, each connection a keep-alive socket with a reused
// read buffer and a response parser that stores nothing (status, body size
// and Location are all a load step needs), so a request costs no allocation
// once its connection is open. Closed or open loop as HttpEngine::Run sets it
// up (http_run.h); requests above the connections wait for one.
//
//   RunH1Worker(&run_state, {.index = 0, .threads = 1, .conns = 4, .slots = 4, .t0 = t0},
//               stop, &sends);
//
// Redirects (--follow_redirects): up to kMaxRedirects hops, on the same
// server only (a Location that is a path, or the target's own
// http://HOST:PORT); any other fails the request as REDIRECTS. A 303, and a
// 301 or 302 answering a POST, is followed with a GET without body.
#ifndef RSSLAB_LOADGEN_HTTP_H1_WORKER_H_
#define RSSLAB_LOADGEN_HTTP_H1_WORKER_H_

#include "loadgen/engine.h"
#include "loadgen/http/http_run.h"

namespace rsslab {
namespace http {

// Runs one thread's share of the step until it is done.
void RunH1Worker(RunState* st, const WorkerArgs& args, const StopFlag* stop, Sends* sends);

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_H1_WORKER_H_
