#include "common/listen.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"

namespace rsslab {

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  HostPort hp;
  absl::string_view port;
  if (absl::StartsWith(address, "[")) {
    size_t close = address.find("]:");
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("address '", address, "' is not [IPv6]:PORT"));
    }
    hp.host = std::string(address.substr(1, close - 1));
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("address '", address, "' is not HOST:PORT"));
    }
    hp.host = std::string(address.substr(0, colon));
    port = address.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(port, &hp.port) || hp.port < 0 || hp.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", address, "' has a bad port (want 0-65535)"));
  }
  return hp;
}

absl::Status CheckBindable(absl::string_view address) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp->port);
  int rc = getaddrinfo(hp->host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", address, ": ", gai_strerror(rc)));
  }
  absl::Status status = absl::OkStatus();
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    // SO_REUSEADDR only (as gRPC does), not SO_REUSEPORT: a port another
    // process listens on must fail here.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      status = absl::UnavailableError(
          absl::StrCat("cannot listen on ", address, ": ", strerror(errno)));
    }
    close(fd);
    break;
  }
  freeaddrinfo(res);
  return status;
}

bool IsLoopback(absl::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a4;
  std::string h(host);
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) {
    return (ntohl(a4.s_addr) >> 24) == 127;
  }
  return false;
}

std::string JoinHostPort(absl::string_view host, int port) {
  if (absl::StrContains(host, ":")) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

}  // namespace rsslab
