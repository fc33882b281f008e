#include "tests/scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <regex>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace testing {

std::string Http(const std::string& address, const std::string& request) {
  std::vector<std::string> hp = absl::StrSplit(address, ':');
  int port = 0;
  if (hp.size() != 2 || !absl::SimpleAtoi(hp[1], &port)) return "bad address";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, hp[0].c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "connect failed";
  }
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[8192];
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  close(fd);
  return out;
}

std::map<std::string, double> ParseExposition(const std::string& body) {
  static const std::regex kSample(
      R"re(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*\})? ([-+]?[0-9.]+([eE][-+]?[0-9]+)?|NaN|[+-]Inf)$)re");
  static const std::regex kMeta(R"re(^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$)re");
  std::map<std::string, double> out;
  std::set<std::string> helped, typed;
  std::map<std::string, std::string> type_of;
  EXPECT_TRUE(absl::EndsWith(body, "\n"));
  for (absl::string_view line : absl::StrSplit(body, '\n', absl::SkipEmpty())) {
    std::string l(line);
    std::smatch m;
    if (std::regex_match(l, m, kMeta)) {
      if (m[1] == "HELP") {
        EXPECT_TRUE(helped.insert(m[2]).second) << "HELP twice: " << l;
      } else {
        EXPECT_TRUE(typed.insert(m[2]).second) << "TYPE twice: " << l;
        type_of[m[2]] = m[3];
        EXPECT_TRUE(m[3] == "gauge" || m[3] == "counter" || m[3] == "histogram") << l;
      }
      continue;
    }
    if (!std::regex_match(l, m, kSample)) {
      ADD_FAILURE() << "not an exposition line: '" << l << "'";
      continue;
    }
    std::string name = m[1];
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(name, suffix)) {
        std::string base = name.substr(0, name.size() - strlen(suffix));
        if (type_of.count(base) && type_of[base] == "histogram") family = base;
      }
    }
    EXPECT_TRUE(helped.count(family) && typed.count(family)) << "no HELP/TYPE before: " << l;
    double v = 0;
    std::string value = m[6];
    if (value == "+Inf") {
      v = 1e308 * 10;
    } else if (value != "NaN") {
      EXPECT_TRUE(absl::SimpleAtod(value, &v)) << l;
    }
    EXPECT_TRUE(out.emplace(name + std::string(m[2]), v).second) << "duplicate: " << l;
  }
  return out;
}


std::string Body(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

}  // namespace testing
}  // namespace rsslab
