#include "agent/readiness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "re2/re2.h"

namespace rsslab {
namespace launch {

LineMatch LineMatch::Prefix(absl::string_view prefix) {
  LineMatch m;
  m.prefix_ = std::string(prefix);
  return m;
}

absl::StatusOr<LineMatch> LineMatch::Regex(absl::string_view pattern) {
  RE2::Options opts;
  opts.set_log_errors(false);
  // Bounded: a pattern's compiled program stays small whatever it is.
  opts.set_max_mem(1 << 20);
  auto re = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), opts);
  if (!re->ok()) {
    return absl::InvalidArgumentError(absl::StrCat("bad regex: ", re->error()));
  }
  LineMatch m;
  m.re_ = std::move(re);
  return m;
}

bool LineMatch::Matches(absl::string_view line) const {
  if (re_ != nullptr) {
    return RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *re_);
  }
  return !prefix_.empty() && absl::StartsWith(line, prefix_);
}

bool LineMatch::HasGroup(absl::string_view name) const {
  return re_ != nullptr && re_->NamedCapturingGroups().count(std::string(name)) > 0;
}

std::string LineMatch::Group(absl::string_view line, absl::string_view name) const {
  if (re_ == nullptr) return "";
  const auto& groups = re_->NamedCapturingGroups();
  auto it = groups.find(std::string(name));
  if (it == groups.end()) return "";
  const int n = re_->NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> sub(n);
  if (!re_->Match(re2::StringPiece(line.data(), line.size()), 0, line.size(), RE2::UNANCHORED,
                  sub.data(), n)) {
    return "";
  }
  return std::string(sub[it->second].data(), sub[it->second].size());
}

std::string LineMatch::Describe() const {
  if (re_ != nullptr) return absl::StrCat("a line matching /", re_->pattern(), "/");
  if (!prefix_.empty()) return absl::StrCat("a line starting with \"", prefix_, "\"");
  return "no line";
}

bool PortAccepts(const std::string& host, int port, absl::Duration timeout) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, host.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof(*a4);
  } else if (inet_pton(AF_INET6, host.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof(*a6);
  } else {
    return false;
  }
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  if (!ok && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof(err);
    ok = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1 &&
         getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0;
  }
  close(fd);
  return ok;
}

}  // namespace launch
}  // namespace rsslab
