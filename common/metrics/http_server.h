// A tiny HTTP/1.1 server for Prometheus scrapes: GET /metrics answers with
// the text a callback renders; anything else gets an error status. One
// thread (named rsslab-metrics) serves up to `max_connections` connections
// at once with poll(), each with its own deadline: a client that connects
// and stalls holds one slot until `io_timeout` and delays nobody else; past
// the bound a connection gets 503 at once. Every connection is closed after
// one response. That is all a scraper needs, and it keeps the metrics path
// away from the gRPC threads. The render callback runs on this thread: it
// must not block (the server's never waits for the GIL).
//
// Example:
//   auto server = MetricsHttpServer::Start("127.0.0.1:9464",
//                                          [] { return exposition_text; });
//   if (!server.ok()) Die(server.status().message());  // names the address
//   (*server)->address();   // "127.0.0.1:9464" (the bound port if 0 was asked)
//   (*server)->Stop();      // also done by the destructor

#ifndef RSSLAB_COMMON_METRICS_HTTP_SERVER_H_
#define RSSLAB_COMMON_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rsslab {
namespace metrics {

// "9464" or ":9464" -> "127.0.0.1:9464" (loopback unless a host is given);
// anything else unchanged.
std::string DefaultToLoopback(absl::string_view address);

class MetricsHttpServer {
 public:
  using Render = std::function<std::string()>;
  struct Options {
    // Per connection: reading the request and writing the response each
    // must finish within this.
    absl::Duration io_timeout = absl::Seconds(5);
    // Largest request head accepted (request line + headers).
    int max_request_bytes = 8192;
    // Connections served at once; more are answered 503 and closed.
    int max_connections = 32;
    // Thread name (15 bytes at most).
    std::string thread_name = "rsslab-metrics";
    // Paths served besides /metrics (e.g. "/sd"), each with its body's
    // content type; rendered on this thread, like /metrics.
    struct Route {
      std::string content_type;
      Render render;
    };
    std::map<std::string, Route> routes;
    // When set, every request must pass it, given its Authorization
    // header's value (nullptr: none), e.g. Credentials::AuthorizeHeader;
    // a request that does not gets 401.
    std::function<absl::Status(const std::string* authorization)> authorize;
  };

  // Binds (no SO_REUSEPORT: a taken port is an error naming the address),
  // listens and starts the thread.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(absl::string_view address,
                                                                  Render render,
                                                                  Options options);
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(absl::string_view address,
                                                                  Render render) {
    return Start(address, std::move(render), Options());
  }
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // HOST:PORT actually bound.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  uint64_t requests_served() const { return served_.load(); }
  // Connections refused with 503 because max_connections were open.
  uint64_t connections_refused() const { return refused_.load(); }

  // Stops accepting, closes the connections in hand, joins. Idempotent.
  void Stop();

 private:
  MetricsHttpServer(Render render, Options options)
      : render_(std::move(render)), options_(std::move(options)) {}
  struct Conn;
  void Loop();
  // Moves one connection on after poll() reported `revents`; false when it
  // is finished (or failed) and should be closed.
  bool Advance(Conn* c, short revents);
  // The response to a complete request head.
  std::string Answer(absl::string_view request);

  const Render render_;
  const Options options_;
  int listen_fd_ = -1;
  // Written by Stop() to wake the loop out of poll().
  int wake_fd_ = -1;
  int port_ = 0;
  std::string address_;
  std::thread thread_;
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> refused_{0};
};

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_COMMON_METRICS_HTTP_SERVER_H_
