// Experiment: the /metrics endpoint on Debian's civetweb 1.15
// instead of common/metrics/http_server, with the same interface, so the
// same tests and the same cost measurement run against both. Not used by
// any binary: bench/metrics_endpoint/README.md says why.
#ifndef RSSLAB_BENCH_METRICS_ENDPOINT_CIVETWEB_METRICS_SERVER_H_
#define RSSLAB_BENCH_METRICS_ENDPOINT_CIVETWEB_METRICS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct mg_context;
struct mg_connection;

namespace rsslab {
namespace metrics {

class CivetwebMetricsServer {
 public:
  using Render = std::function<std::string()>;
  struct Options {
    absl::Duration io_timeout = absl::Seconds(5);
    int max_request_bytes = 8192;
    int worker_threads = 1;
  };
  static absl::StatusOr<std::unique_ptr<CivetwebMetricsServer>> Start(absl::string_view address,
                                                                      Render render,
                                                                      Options options);
  ~CivetwebMetricsServer();
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  uint64_t requests_served() const { return served_.load(); }
  void Stop();

 private:
  explicit CivetwebMetricsServer(Render render) : render_(std::move(render)) {}
  static int Handle(mg_connection* conn, void* self);
  const Render render_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
  std::string address_;
  std::atomic<uint64_t> served_{0};
};

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_BENCH_METRICS_ENDPOINT_CIVETWEB_METRICS_SERVER_H_
