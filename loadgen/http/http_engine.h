// The HTTP call kind: drives an HTTP/1.1 (keep-alive) server on Boost.Beast
// over Asio (h1_worker.h) or an h2c server on nghttp2's session API over Asio
// (h2_worker.h), in a closed or an open loop, behind the same
// LoadDriver interface as the gRPC engine (loadgen/engine.h), so the runner's
// records, phases, snapshots, soaks and summaries are the same.
//
//   rsslab::http::HttpEngine engine({.target = target_ptr});
//   rsslab::LoadResult r = engine.Run(resolved_spec, "load", &stop);
//
// Connections: `channels` of the spec (--connections), spread over
// --client_threads threads, each with its own event loop. HTTP/1.1
// carries one request at a time per connection (a closed loop's
// --concurrency above the connections waits for one); h2c multiplexes the
// requests in flight over them. Open loop: latency runs from each request's
// intended send time (as wrk2 does), so queueing for a connection counts.
//
// Outcomes: a 2xx is ok; any other status fails the request and is counted
// by its code ("404"); a transfer that fails is counted by kind (TIMEOUT,
// CONNECT, BAD_RESPONSE, CLOSED, TOO_LARGE, REDIRECTS, OTHER) with the first
// one's text as the step's first error. Bounds: --deadline_ms per request,
// a body over --max_receive_mb and response headers over 64 KiB fail it.
#ifndef RSSLAB_LOADGEN_HTTP_HTTP_ENGINE_H_
#define RSSLAB_LOADGEN_HTTP_HTTP_ENGINE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "loadgen/engine.h"
#include "loadgen/http/http_target.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/status_code.h"

namespace rsslab {
namespace http {

struct RunState;  // http_run.h

class HttpEngine : public LoadDriver {
 public:
  struct Options {
    std::shared_ptr<const Target> target;
    uint64_t max_errors = 0;  // as LoadEngine::Options::max_errors
    absl::Duration connect_timeout = absl::Seconds(5);
    // Threads, each its own event loop; 0: one per connection, at
    // most the CPUs this process may run on.
    int client_threads = 0;
    int max_receive_mb = kDefaultMaxReceiveMb;  // the largest body taken
    LoadgenMetrics* metrics = nullptr;          // not owned; may be null
  };

  explicit HttpEngine(Options options);
  ~HttpEngine() override;

  LoadResult Run(const rsslab::v1::LoadSpec& spec, const std::string& step,
                 const StopFlag* stop) override;
  LiveProgress Progress() const override;
  rsslab::v1::Latency TakeInterval() override;

 private:
  Options options_;
  mutable absl::Mutex mu_;
  std::shared_ptr<RunState> current_ ABSL_GUARDED_BY(mu_);
};

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_HTTP_ENGINE_H_
