// The metrics library alone: exposition text, the histogram, and the HTTP
// server over real loopback sockets.

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "common/metrics/exposition.h"
#include "common/metrics/http_server.h"
#include "common/metrics/latency_histogram.h"

namespace rsslab {
namespace metrics {
namespace {

TEST(ExpositionTest, FamiliesSamplesAndEscaping) {
  Exposition e;
  e.Gauge("g", "A gauge.", int64_t{42});
  e.Counter("c_total", "A counter.", uint64_t{7}, {{"phase", "fill"}});
  e.Counter("c_total", "A counter.", uint64_t{3}, {{"phase", "a\"b\\c\nd"}});
  e.Gauge("f", "Float.", 0.25);
  EXPECT_EQ(e.Text(),
            "# HELP g A gauge.\n# TYPE g gauge\ng 42\n"
            "# HELP c_total A counter.\n# TYPE c_total counter\n"
            "c_total{phase=\"fill\"} 7\nc_total{phase=\"a\\\"b\\\\c\\nd\"} 3\n"
            "# HELP f Float.\n# TYPE f gauge\nf 0.25\n");
  EXPECT_EQ(Exposition::FormatDouble(1e300 * 1e300), "+Inf");
  EXPECT_EQ(Exposition::FormatDouble(123456789012.0), "123456789012");
  EXPECT_EQ(Exposition::FormatDouble(0.00025), "0.00025");
  EXPECT_EQ(Exposition::FormatDouble(0.1 + 0.2), "0.30000000000000004");
}

TEST(ExpositionTest, InterleavedFamiliesAreGroupedInFirstSeenOrder) {
  // One process's families, then the next one's: each family's samples
  // end up together, as the format requires.
  Exposition e;
  for (const char* pid : {"1", "2"}) {
    e.Gauge("rss", "RSS.", int64_t{10}, {{"pid", pid}});
    e.Gauge("threads", "Threads.", int64_t{3}, {{"pid", pid}});
  }
  EXPECT_EQ(e.Text(),
            "# HELP rss RSS.\n# TYPE rss gauge\nrss{pid=\"1\"} 10\nrss{pid=\"2\"} 10\n"
            "# HELP threads Threads.\n# TYPE threads gauge\n"
            "threads{pid=\"1\"} 3\nthreads{pid=\"2\"} 3\n");
}

TEST(LatencyHistogramTest, BucketsAreCumulativeAndConsistent) {
  LatencyHistogram h;
  h.Observe(absl::Microseconds(50));    // <= 100us
  h.Observe(absl::Microseconds(100));   // <= 100us (le is inclusive)
  h.Observe(absl::Milliseconds(3));     // <= 5ms
  h.Observe(absl::Seconds(60));         // +Inf only
  LatencyHistogram::Counts c = h.Read();
  EXPECT_EQ(c.cumulative[0], 2u);
  EXPECT_EQ(c.cumulative[4], 2u);  // le=2.5ms
  EXPECT_EQ(c.cumulative[5], 3u);  // le=5ms
  EXPECT_EQ(c.cumulative[LatencyHistogram::kBuckets - 1], 3u);
  EXPECT_EQ(c.count, 4u);
  EXPECT_NEAR(c.sum_seconds, 60.00315, 1e-9);
  Exposition e;
  e.Histogram("lat_seconds", "Latency.", c);
  EXPECT_TRUE(absl::StrContains(e.Text(), "lat_seconds_bucket{le=\"0.0001\"} 2\n"));
  EXPECT_TRUE(absl::StrContains(e.Text(), "lat_seconds_bucket{le=\"+Inf\"} 4\n"));
  EXPECT_TRUE(absl::StrContains(e.Text(), "lat_seconds_count 4\n"));
  EXPECT_TRUE(absl::StrContains(e.Text(), "# TYPE lat_seconds histogram\n"));
}

TEST(LatencyHistogramTest, ConcurrentObserversLoseNothing) {
  LatencyHistogram h;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&h, t] {
      for (int i = 0; i < 50000; ++i) h.Observe(absl::Microseconds((i * 37 + t) % 20000));
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(h.Read().count, 200000u);
}

// Connects to 127.0.0.1:port, sends `req` (maybe nothing), reads to EOF.
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

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MetricsHttpServer::Options o;
    o.io_timeout = absl::Milliseconds(500);
    auto s = MetricsHttpServer::Start(
        "127.0.0.1:0",
        [this] {
          ++renders_;
          return std::string("# HELP x X.\n# TYPE x gauge\nx 1\n");
        },
        o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }
  std::atomic<int> renders_{0};
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(HttpServerTest, GetMetrics) {
  std::string r = Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Type: text/plain; version=0.0.4")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Length: 31\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Connection: close\r\n")) << r;
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n# HELP x X.\n# TYPE x gauge\nx 1\n")) << r;
  // Query strings are ignored; HEAD has no body.
  EXPECT_TRUE(absl::StartsWith(Exchange(server_->port(), "GET /metrics?a=b HTTP/1.0\r\n\r\n"),
                               "HTTP/1.1 200 OK"));
  EXPECT_TRUE(absl::EndsWith(Exchange(server_->port(), "HEAD /metrics HTTP/1.1\r\n\r\n"),
                             "\r\n\r\n"));
  EXPECT_EQ(server_->address(), absl::StrCat("127.0.0.1:", server_->port()));
}

TEST_F(HttpServerTest, ErrorsForEverythingElse) {
  EXPECT_TRUE(absl::StartsWith(Exchange(server_->port(), "GET / HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 404 Not Found"));
  EXPECT_TRUE(absl::StartsWith(Exchange(server_->port(), "POST /metrics HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 405 Method Not Allowed"));
  EXPECT_TRUE(absl::StartsWith(Exchange(server_->port(), "\x16\x03\x01garbage\r\n\r\n"),
                               "HTTP/1.1 400 Bad Request"));
  EXPECT_TRUE(absl::StartsWith(Exchange(server_->port(), std::string(20000, 'A')),
                               "HTTP/1.1 431"));
  EXPECT_EQ(renders_.load(), 0);
  // Still serving.
  EXPECT_TRUE(absl::StartsWith(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
                               "HTTP/1.1 200 OK"));
}

TEST(HttpServerRoutes, ExtraPathsAndABearerTokenCheck) {
  MetricsHttpServer::Options o;
  o.routes["/sd"] = {"application/json", [] { return std::string("[]"); }};
  o.authorize = [](const std::string* a) {
    return a != nullptr && *a == "Bearer s3cret" ? absl::OkStatus()
                                                 : absl::UnauthenticatedError("no");
  };
  auto s = MetricsHttpServer::Start("127.0.0.1:0", [] { return std::string("x 1\n"); }, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const int port = (*s)->port();
  std::string r = Exchange(port, "GET /sd HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Type: application/json\r\n")) << r;
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n[]")) << r;
  // The header's name in any case; without it, or with another token: 401.
  EXPECT_TRUE(absl::StartsWith(
      Exchange(port, "GET /metrics HTTP/1.1\r\nauthorization:Bearer s3cret\r\n\r\n"),
      "HTTP/1.1 200 OK"));
  r = Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 401 Unauthorized")) << r;
  EXPECT_FALSE(absl::StrContains(r, "x 1")) << r;
  EXPECT_TRUE(absl::StartsWith(
      Exchange(port, "GET /sd HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n"),
      "HTTP/1.1 401 Unauthorized"));
}

TEST_F(HttpServerTest, SlowClientIsCutOffAndOthersAreServed) {
  std::string slow;
  absl::Time t0 = absl::Now();
  // Connects and sends half a request line, then nothing.
  std::thread t([&] { slow = Exchange(server_->port(), "GET /met"); });
  std::string fast = Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n");
  t.join();
  EXPECT_TRUE(absl::StartsWith(fast, "HTTP/1.1 200 OK")) << fast;
  EXPECT_TRUE(slow.empty() || absl::StartsWith(slow, "HTTP/1.1 408")) << slow;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

// Hardening class 6 (docs/RELIABILITY.md): ten sockets that send a request line and stall once
// made a scrape wait 50 s (connections were served one at a time, each up
// to its io_timeout). Now each stalled socket holds a slot and nothing else.
TEST(HttpServerSlowClients, TenStalledSocketsDoNotDelayAScrapeAndTheCountIsBounded) {
  MetricsHttpServer::Options o;
  o.io_timeout = absl::Seconds(5);
  o.max_connections = 12;
  auto s = MetricsHttpServer::Start("127.0.0.1:0", [] { return std::string("x 1\n"); }, o);
  ASSERT_TRUE(s.ok()) << s.status();
  const int port = (*s)->port();
  auto connect_and_send = [port](const std::string& what) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    (void)!send(fd, what.data(), what.size(), MSG_NOSIGNAL);
    return fd;
  };
  std::vector<int> stalled;
  for (int i = 0; i < 10; ++i) stalled.push_back(connect_and_send("GET /metrics HTTP/1.1\r\n"));
  absl::SleepFor(absl::Milliseconds(100));  // let the server accept them all
  const absl::Time t0 = absl::Now();
  std::string r = Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK")) << r;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
  // Two more stalled ones fill the 12 slots; the next connection is refused
  // at once, not queued behind them.
  stalled.push_back(connect_and_send("GET /"));
  stalled.push_back(connect_and_send("GET /"));
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time t1 = absl::Now();
  r = Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 503")) << r;
  EXPECT_LT(absl::Now() - t1, absl::Seconds(1));
  EXPECT_EQ((*s)->connections_refused(), 1u);
  for (int fd : stalled) close(fd);
  // Slots come back once the stalled clients go.
  absl::Time until = absl::Now() + absl::Seconds(5);
  while (absl::Now() < until &&
         !absl::StartsWith(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200")) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(absl::StartsWith(Exchange(port, "GET /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200"));
}

TEST_F(HttpServerTest, ConcurrentScrapesAllSucceed) {
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      for (int j = 0; j < 10; ++j) {
        if (absl::StartsWith(Exchange(server_->port(), "GET /metrics HTTP/1.1\r\n\r\n"),
                             "HTTP/1.1 200 OK")) {
          ++ok;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 80);
  EXPECT_EQ(server_->requests_served(), 80u);
}

TEST_F(HttpServerTest, RunsOnANamedThread) {
  int named = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) {
    std::ifstream f(absl::StrCat("/proc/self/task/", e->d_name, "/comm"));
    std::string comm;
    if (std::getline(f, comm) && comm == "rsslab-metrics") ++named;
  }
  closedir(d);
  EXPECT_EQ(named, 1);
}

TEST_F(HttpServerTest, TakenPortIsAnErrorNamingTheAddress) {
  std::string addr = server_->address();
  auto second = MetricsHttpServer::Start(addr, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), absl::StrCat("cannot listen on ", addr,
                                                    ": Address already in use"));
}

TEST(DefaultToLoopbackTest, BarePortMeansLoopback) {
  EXPECT_EQ(DefaultToLoopback("9464"), "127.0.0.1:9464");
  EXPECT_EQ(DefaultToLoopback(":9464"), "127.0.0.1:9464");
  EXPECT_EQ(DefaultToLoopback("0.0.0.0:9464"), "0.0.0.0:9464");
  EXPECT_EQ(DefaultToLoopback(""), "");
}

}  // namespace
}  // namespace metrics
}  // namespace rsslab
