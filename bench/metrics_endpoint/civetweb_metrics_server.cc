#include "bench/metrics_endpoint/civetweb_metrics_server.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/listen.h"
#include "common/metrics/exposition.h"

namespace rsslab {
namespace metrics {

absl::StatusOr<std::unique_ptr<CivetwebMetricsServer>> CivetwebMetricsServer::Start(
    absl::string_view address, Render render, Options options) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  static std::once_flag library_once;
  std::call_once(library_once, [] { mg_init_library(0); });
  const std::string ports = JoinHostPort(hp->host, hp->port);
  const std::string threads = absl::StrCat(options.worker_threads);
  const std::string timeout = absl::StrCat(absl::ToInt64Milliseconds(options.io_timeout));
  const std::string max_request = absl::StrCat(options.max_request_bytes);
  // No document_root: nothing but the registered handler is served.
  const char* config[] = {"listening_ports", ports.c_str(),      "num_threads",
                          threads.c_str(),   "request_timeout_ms", timeout.c_str(),
                          "enable_keep_alive", "no",             "max_request_size",
                          max_request.c_str(), nullptr};
  std::unique_ptr<CivetwebMetricsServer> s(new CivetwebMetricsServer(std::move(render)));
  mg_callbacks callbacks;
  memset(&callbacks, 0, sizeof(callbacks));
  mg_init_data init{&callbacks, s.get(), config};
  char text[256] = {0};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof(text)};
  s->ctx_ = mg_start2(&init, &error);
  if (s->ctx_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", text));
  }
  mg_set_request_handler(s->ctx_, "/metrics$", &CivetwebMetricsServer::Handle, s.get());
  mg_server_port bound[1];
  if (mg_get_server_ports(s->ctx_, 1, bound) >= 1) s->port_ = bound[0].port;
  s->address_ = JoinHostPort(hp->host, s->port_);
  return s;
}

int CivetwebMetricsServer::Handle(mg_connection* conn, void* self) {
  auto* s = static_cast<CivetwebMetricsServer*>(self);
  const mg_request_info* ri = mg_get_request_info(conn);
  const bool head = strcmp(ri->request_method, "HEAD") == 0;
  if (!head && strcmp(ri->request_method, "GET") != 0) {
    mg_send_http_error(conn, 405, "only GET /metrics\n");
    return 405;
  }
  const std::string body = s->render_();
  mg_printf(conn,
            "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n",
            std::string(kContentType).c_str(), body.size());
  if (!head) mg_write(conn, body.data(), body.size());
  s->served_.fetch_add(1);
  return 200;
}

CivetwebMetricsServer::~CivetwebMetricsServer() { Stop(); }

void CivetwebMetricsServer::Stop() {
  if (ctx_ != nullptr) mg_stop(ctx_);
  ctx_ = nullptr;
}

}  // namespace metrics
}  // namespace rsslab
