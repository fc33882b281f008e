#include "common/metrics/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/listen.h"
#include "common/metrics/exposition.h"

namespace rsslab {
namespace metrics {

namespace {

int MillisLeft(absl::Time deadline) {
  int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms < 0 ? 0 : static_cast<int>(ms);
}

// Writes all of `data` before `deadline`; false if the client is gone or
// too slow.
bool WriteAll(int fd, absl::string_view data, absl::Time deadline) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      int left = MillisLeft(deadline);
      if (left == 0 || poll(&p, 1, left) <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool head, absl::string_view extra = "") {
  std::string r = absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                               "\r\nContent-Length: ", body.size(), "\r\n", extra,
                               "Connection: close\r\n\r\n");
  if (!head) r.append(body.data(), body.size());
  return r;
}

}  // namespace

std::string DefaultToLoopback(absl::string_view address) {
  if (!address.empty() && address.find(':') == absl::string_view::npos) {
    return absl::StrCat("127.0.0.1:", address);
  }
  if (absl::StartsWith(address, ":")) return absl::StrCat("127.0.0.1", address);
  return std::string(address);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    absl::string_view address, Render render, Options options) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp->port);
  int rc = getaddrinfo(hp->host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", address, ": ", gai_strerror(rc)));
  }
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  if (fd < 0) {
    freeaddrinfo(res);
    return absl::InternalError(absl::StrCat("cannot listen on ", address, ": ", strerror(errno)));
  }
  int one = 1;
  // SO_REUSEADDR (restart after TIME_WAIT) but not SO_REUSEPORT: a port
  // another process listens on must fail.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    int err = errno;
    freeaddrinfo(res);
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", strerror(err)));
  }
  freeaddrinfo(res);
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int bound_port = bound.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);

  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer(std::move(render), std::move(options)));
  s->listen_fd_ = fd;
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->port_ = bound_port;
  s->address_ = JoinHostPort(hp->host, bound_port);
  s->thread_ = std::thread([srv = s.get()] { srv->Loop(); });
  // Named from here, so the name is there as soon as Start() returns.
  pthread_setname_np(s->thread_.native_handle(), s->options_.thread_name.substr(0, 15).c_str());
  return s;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stopped_.exchange(true)) return;
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) < 0) {
    // The eventfd cannot be full after one write; nothing to do.
  }
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void MetricsHttpServer::Loop() {
  while (!stopped_.load()) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int n = poll(p, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;  // the client gave up, or out of fds: try again
    ServeOne(fd);
    close(fd);
  }
}

void MetricsHttpServer::ServeOne(int fd) {
  const absl::Time deadline = absl::Now() + options_.io_timeout;
  // Read the request head: up to the blank line, within the size cap and
  // the deadline. The body (a GET has none) is never read.
  std::string req;
  char buf[2048];
  size_t head_end = std::string::npos;
  while (head_end == std::string::npos) {
    if (static_cast<int>(req.size()) > options_.max_request_bytes) {
      WriteAll(fd, Response("431 Request Header Fields Too Large", "text/plain",
                            "request head too large\n", false),
               deadline);
      return;
    }
    pollfd p{fd, POLLIN, 0};
    int left = MillisLeft(deadline);
    if (left == 0 || poll(&p, 1, left) <= 0) {
      // Too slow: say so if we can, then drop it.
      WriteAll(fd, Response("408 Request Timeout", "text/plain", "request timeout\n", false),
               absl::Now() + absl::Milliseconds(100));
      return;
    }
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return;  // closed before a full request
    req.append(buf, n);
    head_end = req.find("\r\n\r\n");
    if (head_end == std::string::npos) head_end = req.find("\n\n");
  }

  absl::string_view line(req);
  line = line.substr(0, line.find('\n'));
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  std::string out;
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.") || parts[1].empty() ||
      parts[1][0] != '/') {
    out = Response("400 Bad Request", "text/plain", "bad request\n", false);
  } else if (parts[0] != "GET" && parts[0] != "HEAD") {
    out = Response("405 Method Not Allowed", "text/plain", "only GET /metrics\n", false,
                   "Allow: GET, HEAD\r\n");
  } else {
    const bool head = parts[0] == "HEAD";
    absl::string_view path = parts[1].substr(0, parts[1].find('?'));
    if (path == "/metrics") {
      out = Response("200 OK", kContentType, render_(), head);
      served_.fetch_add(1);
    } else {
      out = Response("404 Not Found", "text/plain", "not found; try /metrics\n", head);
    }
  }
  if (!WriteAll(fd, out, deadline)) return;
  // Half-close and drain briefly, so that unread request bytes do not turn
  // the close into a reset that could cut the response short at the client.
  shutdown(fd, SHUT_WR);
  const absl::Time drain_until = std::min(deadline, absl::Now() + absl::Milliseconds(200));
  while (true) {
    pollfd p{fd, POLLIN, 0};
    int left = MillisLeft(drain_until);
    if (left == 0 || poll(&p, 1, left) <= 0) break;
    if (recv(fd, buf, sizeof(buf), 0) <= 0) break;
  }
}

}  // namespace metrics
}  // namespace rsslab
