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
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "common/listen.h"
#include "common/metrics/exposition.h"

namespace rsslab {
namespace metrics {

namespace {

int MillisLeft(absl::Time deadline) {
  int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms < 0 ? 0 : static_cast<int>(ms);
}

std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool head, absl::string_view extra = "") {
  std::string r = absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                               "\r\nContent-Length: ", body.size(), "\r\n", extra,
                               "Connection: close\r\n\r\n");
  if (!head) r.append(body.data(), body.size());
  return r;
}

// The value of the first header `name` (lower case) in a request head,
// trimmed; nullopt when absent.
std::optional<std::string> Header(absl::string_view head, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(head, '\n')) {
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(line.substr(0, colon)), name)) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return std::nullopt;
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
  // Non-blocking: the loop accepts until EAGAIN.
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, res->ai_protocol);
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

// One connection in hand: the request head read so far, then the response
// being written, each within its deadline.
struct MetricsHttpServer::Conn {
  int fd = -1;
  absl::Time deadline;
  std::string in;
  std::string out;
  size_t out_sent = 0;
  bool writing = false;
  // After the response: half-closed, draining unread bytes briefly.
  bool draining = false;
};

void MetricsHttpServer::Loop() {
  // Every connection is served from this one thread with poll(), each with
  // its own deadline, so clients that connect and stall (ten of them once
  // held a scrape for 50 s when connections were served in turn) cost a
  // slot each and delay nobody. Past max_connections a new connection is
  // answered 503 at once and closed.
  std::vector<Conn> conns;
  std::vector<pollfd> fds;
  while (!stopped_.load()) {
    fds.clear();
    fds.push_back({listen_fd_, POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    absl::Time next = absl::InfiniteFuture();
    for (const Conn& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
      next = std::min(next, c.deadline);
    }
    const int timeout = next == absl::InfiniteFuture() ? -1 : std::max(1, MillisLeft(next));
    int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) break;
    const absl::Time now = absl::Now();
    std::vector<Conn> kept;
    kept.reserve(conns.size() + 1);
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      const short ev = fds[i + 2].revents;
      bool keep = true;
      if (ev != 0) keep = Advance(&c, ev);
      if (keep && now >= c.deadline) {
        if (!c.writing && !c.draining) {
          // Too slow: say so if the socket takes it, then drop it.
          std::string r = Response("408 Request Timeout", "text/plain", "request timeout\n", false);
          (void)!send(c.fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        keep = false;
      }
      if (keep) {
        kept.push_back(std::move(c));
      } else {
        close(c.fd);
      }
    }
    conns.swap(kept);
    if ((fds[0].revents & POLLIN) != 0) {
      // Accept everything waiting, up to the bound.
      while (true) {
        int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;  // none left, the client gave up, or out of fds
        if (static_cast<int>(conns.size()) >= options_.max_connections) {
          // Counted before the answer: a client that has read the 503
          // then finds it counted (the sanitizer run's timing showed the
          // count read before it was added).
          refused_.fetch_add(1);
          std::string r = Response("503 Service Unavailable", "text/plain",
                                   "too many connections to the metrics endpoint\n", false);
          (void)!send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          close(fd);
          continue;
        }
        Conn c;
        c.fd = fd;
        c.deadline = absl::Now() + options_.io_timeout;
        conns.push_back(std::move(c));
      }
    }
  }
  for (Conn& c : conns) close(c.fd);
}

bool MetricsHttpServer::Advance(Conn* c, short revents) {
  char buf[4096];
  if (c->draining) {
    // Unread request bytes would turn the close into a reset that could cut
    // the response short at the client: read them until EOF or the deadline.
    ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    return n > 0 || (n < 0 && (errno == EINTR || errno == EAGAIN));
  }
  if (c->writing) {
    while (c->out_sent < c->out.size()) {
      ssize_t n = send(c->fd, c->out.data() + c->out_sent, c->out.size() - c->out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c->out_sent += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      return false;
    }
    shutdown(c->fd, SHUT_WR);
    c->draining = true;
    c->writing = false;
    c->deadline = std::min(c->deadline, absl::Now() + absl::Milliseconds(200));
    return true;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return true;
  ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;  // closed before a full request
  c->in.append(buf, n);
  size_t head_end = c->in.find("\r\n\r\n");
  if (head_end == std::string::npos) head_end = c->in.find("\n\n");
  if (head_end == std::string::npos) {
    if (static_cast<int>(c->in.size()) <= options_.max_request_bytes) return true;
    c->out = Response("431 Request Header Fields Too Large", "text/plain",
                      "request head too large\n", false);
  } else {
    c->out = Answer(c->in);
  }
  c->in.clear();
  c->writing = true;
  // The response gets its own io_timeout from now.
  c->deadline = absl::Now() + options_.io_timeout;
  return Advance(c, POLLOUT);
}

std::string MetricsHttpServer::Answer(absl::string_view req) {
  absl::string_view line(req);
  line = line.substr(0, line.find('\n'));
  if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
  std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/1.") || parts[1].empty() ||
      parts[1][0] != '/') {
    return Response("400 Bad Request", "text/plain", "bad request\n", false);
  }
  if (parts[0] != "GET" && parts[0] != "HEAD") {
    return Response("405 Method Not Allowed", "text/plain", "only GET /metrics\n", false,
                    "Allow: GET, HEAD\r\n");
  }
  const bool head = parts[0] == "HEAD";
  if (options_.authorize) {
    std::optional<std::string> authorization = Header(req, "authorization");
    if (!options_.authorize(authorization ? &*authorization : nullptr).ok()) {
      return Response("401 Unauthorized", "text/plain", "a bearer token is required\n", head,
                      "WWW-Authenticate: Bearer\r\n");
    }
  }
  absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path == "/metrics") {
    served_.fetch_add(1);
    return Response("200 OK", kContentType, render_(), head);
  }
  if (auto route = options_.routes.find(std::string(path)); route != options_.routes.end()) {
    served_.fetch_add(1);
    return Response("200 OK", route->second.content_type, route->second.render(), head);
  }
  return Response("404 Not Found", "text/plain", "not found; try /metrics\n", head);
}

}  // namespace metrics
}  // namespace rsslab
