// Listening addresses: parsing HOST:PORT and checking one is free, so a
// taken port is reported by name instead of as a generic gRPC failure.
//
// Example:
//   absl::Status s = CheckBindable("127.0.0.1:50051");
//   // "cannot listen on 127.0.0.1:50051: Address already in use"

#ifndef RSSLAB_COMMON_LISTEN_H_
#define RSSLAB_COMMON_LISTEN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

// Accepts "host:port", "[v6]:port"; port 0 means "pick a free one".
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// Binds (without SO_REUSEPORT) and closes a socket at the address.
absl::Status CheckBindable(absl::string_view address);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopback(absl::string_view host);

// "host:port" for gRPC, bracketing IPv6 hosts.
std::string JoinHostPort(absl::string_view host, int port);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_LISTEN_H_
