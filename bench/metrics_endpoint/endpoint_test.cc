// The endpoint tests of common/metrics/metrics_lib_test.cc (GET, errors for
// everything else, garbage, an oversized head, a slow client, concurrent
// scrapes, a taken port), run against both implementations: ours and the
// civetweb experiment. Also counts the threads each one adds.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/metrics_endpoint/civetweb_metrics_server.h"
#include "common/metrics/http_server.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace metrics {
namespace {

std::string Exchange(int port, const std::string& req, absl::Duration timeout = absl::Seconds(10)) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "connect failed";
  }
  if (!req.empty()) (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (absl::Now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, n);
  }
  close(fd);
  return out;
}

int Threads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

template <typename Server>
class EndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    before_ = Threads();
    typename Server::Options o;
    o.io_timeout = absl::Milliseconds(500);
    auto s = Server::Start(
        "127.0.0.1:0",
        [this] {
          ++renders_;
          return std::string("# HELP x X.\n# TYPE x gauge\nx 1\n");
        },
        o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    added_ = Threads() - before_;
  }
  int before_ = 0, added_ = 0;
  std::atomic<int> renders_{0};
  std::unique_ptr<Server> server_;
};

using Implementations = ::testing::Types<MetricsHttpServer, CivetwebMetricsServer>;
TYPED_TEST_SUITE(EndpointTest, Implementations);

TYPED_TEST(EndpointTest, GetMetrics) {
  const int port = this->server_->port();
  std::string r = Exchange(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Type: text/plain; version=0.0.4")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Length: 31\r\n")) << r;
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n# HELP x X.\n# TYPE x gauge\nx 1\n")) << r;
  EXPECT_TRUE(absl::StartsWith(Exchange(port, "GET /metrics?a=b HTTP/1.0\r\n\r\n"),
                               "HTTP/1.1 200 OK"));
  EXPECT_TRUE(absl::EndsWith(Exchange(port, "HEAD /metrics HTTP/1.1\r\n\r\n"), "\r\n\r\n"));
  EXPECT_EQ(this->server_->address(), absl::StrCat("127.0.0.1:", port));
}

TYPED_TEST(EndpointTest, ErrorsForEverythingElse) {
  const int port = this->server_->port();
  std::string r;
  r = Exchange(port, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 404")) << r;
  r = Exchange(port, "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 405")) << r;
  // Ours answers HTTP/1.1 400; civetweb HTTP/1.0 400: either tells a
  // scraper what went wrong.
  r = Exchange(port, "\x16\x03\x01garbage\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 400") || absl::StartsWith(r, "HTTP/1.0 400")) << r;
  // Ours: 431; civetweb: HTTP/1.0 400.
  r = Exchange(port, std::string(20000, 'A'));
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 431") || absl::StartsWith(r, "HTTP/1.0 400"))
      << r.substr(0, 200);
  EXPECT_EQ(this->renders_.load(), 0);
  EXPECT_TRUE(absl::StartsWith(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK"));
}

TYPED_TEST(EndpointTest, SlowClientIsCutOffAndOthersAreServed) {
  const int port = this->server_->port();
  std::string slow;
  absl::Time t0 = absl::Now();
  std::thread t([&] { slow = Exchange(port, "GET /met"); });
  std::string fast = Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
  t.join();
  EXPECT_TRUE(absl::StartsWith(fast, "HTTP/1.1 200 OK")) << fast;
  // Ours: 408 (or nothing); civetweb: HTTP/1.0 400 once its timeout passed.
  EXPECT_TRUE(slow.empty() || absl::StartsWith(slow, "HTTP/1.1 408") ||
              absl::StartsWith(slow, "HTTP/1.0 400"))
      << slow;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

TYPED_TEST(EndpointTest, ConcurrentScrapesAllSucceed) {
  const int port = this->server_->port();
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      for (int j = 0; j < 10; ++j) {
        if (absl::StartsWith(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK")) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 80);
  EXPECT_EQ(this->server_->requests_served(), 80u);
}

TYPED_TEST(EndpointTest, TakenPortIsAnError) {
  auto second = TypeParam::Start(this->server_->address(), [] { return std::string(); },
                                 typename TypeParam::Options());
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::StartsWith(second.status().message(),
                               absl::StrCat("cannot listen on ", this->server_->address())))
      << second.status().message();
  std::cout << "threads added: " << this->added_ << "; taken port: " << second.status().message()
            << "\n";
}

}  // namespace
}  // namespace metrics
}  // namespace rsslab
