// rsslab_loadgen --metrics_listen end to end: a real server on loopback, a
// real loadgen run scraped over HTTP mid-run and at the end (held open by
// --metrics_hold), every value checked against the run's own events.jsonl
// and summary.csv.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/scrape.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Body;
using ::rsslab::testing::Child;
using ::rsslab::testing::Events;
using ::rsslab::testing::Http;
using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ParseExposition;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::ServerProcess;
using ::rsslab::testing::StartServer;
using ::rsslab::testing::Tmp;
using ::rsslab::v1::Event;
using ::testing::HasSubstr;

using Metrics = std::map<std::string, double>;

// A wait between two loads, so one scrape lands where nothing moves.
std::string ScenarioFile() {
  const std::string path = Tmp("metrics.txtpb");
  std::ofstream(path) << R"pb(
name: "metrics"
step { name: "fill" set_phase { phase: "fill" } }
step { name: "first" load { requests: 300 } }
step { name: "seen" snapshot { gc: false } }
step { name: "pause" wait { seconds: 3 } }
step { name: "second" load { requests: 4000 } }
step { name: "last" snapshot { gc: false } }
)pb";
  return path;
}

// "rsslab_loadgen: metrics at http://127.0.0.1:PORT/metrics" -> HOST:PORT.
std::string MetricsAddress(const std::string& err) {
  const std::string mark = "metrics at http://";
  size_t at = err.find(mark);
  if (at == std::string::npos) return "";
  at += mark.size();
  return err.substr(at, err.find("/metrics", at) - at);
}

Metrics Scrape(const std::string& address) {
  const std::string resp = Http(address, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(resp, "HTTP/1.1 200")) << resp.substr(0, 200);
  return ParseExposition(Body(resp));
}

double Requests(const Metrics& m) {
  double n = 0;
  for (const auto& [k, v] : m) {
    if (absl::StartsWith(k, "rsslab_loadgen_requests_total{")) n += v;
  }
  return n;
}

bool StepIs(const Metrics& m, const std::string& step) {
  for (const auto& [k, v] : m) {
    if (absl::StartsWith(k, "rsslab_loadgen_step_info{") &&
        absl::StrContains(k, absl::StrCat("step=\"", step, "\""))) {
      return v == 1;
    }
  }
  return false;
}

// Polls the endpoint until `pred` holds (or 60 s pass); the last scrape.
template <typename Pred>
Metrics ScrapeUntil(const std::string& address, Pred pred) {
  Metrics m;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  do {
    m = Scrape(address);
    if (pred(m)) return m;
    absl::SleepFor(absl::Milliseconds(20));
  } while (absl::Now() < give_up);
  ADD_FAILURE() << "condition never held; last scrape had " << m.size() << " samples";
  return m;
}

// summary.csv's value in `column` (first data row).
std::string SummaryValue(const std::string& dir, const std::string& column) {
  std::vector<std::string> lines = absl::StrSplit(ReadFile(dir + "/summary.csv"), '\n');
  if (lines.size() < 2) return "";
  std::vector<std::string> head = absl::StrSplit(lines[0], ',');
  std::vector<std::string> row = absl::StrSplit(lines[1], ',');
  for (size_t i = 0; i < head.size() && i < row.size(); ++i) {
    if (head[i] == column) return row[i];
  }
  return "";
}

TEST(LoadgenMetricsTest, ScrapedMidRunAndAtTheEndAgreesWithTheRun) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("metrics_run");
  Child lg(Loadgen(), {"--target=" + server->data_address(),
                       "--control=" + server->control_address(), "--scenario=" + ScenarioFile(),
                       "--progress=lines", "--out=" + out, "--metrics_listen=127.0.0.1:0",
                       "--metrics_hold=120s"});
  ASSERT_TRUE(lg.WaitForStderr("metrics at http://", absl::Seconds(30))) << lg.Stderr();
  const std::string addr = MetricsAddress(lg.Stderr());
  ASSERT_TRUE(absl::StartsWith(addr, "127.0.0.1:")) << lg.Stderr();

  // Mid-run, in the wait: the first load and the snapshot after it are in
  // events.jsonl, and the scrape must say exactly the same.
  Metrics pause = ScrapeUntil(addr, [](const Metrics& m) { return StepIs(m, "pause"); });
  uint64_t first_requests = 0;
  int64_t seen_rss = 0;
  for (const Event& e : Events(out)) {
    if (e.has_load()) first_requests += e.load().requests_ok() + e.load().requests_failed();
    if (e.has_snapshot() && e.label() == "seen") seen_rss = e.snapshot().status().rss_bytes();
  }
  EXPECT_EQ(first_requests, 300u);
  EXPECT_EQ(Requests(pause), 300);
  EXPECT_EQ(pause["rsslab_loadgen_requests_total{code=\"OK\"}"], 300);
  EXPECT_EQ(pause["rsslab_loadgen_request_latency_seconds_count"], 300);
  EXPECT_EQ(pause["rsslab_loadgen_errors_total"], 0);
  EXPECT_EQ(pause["rsslab_loadgen_requests_in_flight"], 0);
  EXPECT_EQ(pause["rsslab_loadgen_step"], 4);
  EXPECT_EQ(pause["rsslab_loadgen_steps_total{result=\"ok\"}"], 3);
  EXPECT_EQ(pause["rsslab_loadgen_run_finished"], 0);
  ASSERT_GT(seen_rss, 0);
  EXPECT_EQ(pause["rsslab_loadgen_server_resident_memory_bytes"], seen_rss);

  // Mid-load: counting up, between the two loads' totals.
  Metrics mid = ScrapeUntil(addr, [](const Metrics& m) {
    const auto step = m.find("rsslab_loadgen_step");
    return (StepIs(m, "second") && Requests(m) > 300) ||
           (step != m.end() && step->second > 5);
  });
  EXPECT_TRUE(StepIs(mid, "second")) << "the second load ended before a scrape saw it";
  EXPECT_GT(Requests(mid), 300);
  EXPECT_LT(Requests(mid), 4300);
  EXPECT_EQ(mid["rsslab_loadgen_run_finished"], 0);

  // The end, held open: totals equal the summary's and the events'.
  ASSERT_TRUE(lg.WaitForStderr("serving the final metrics", absl::Seconds(120))) << lg.Stderr();
  Metrics end = Scrape(addr);
  uint64_t requests = 0, failed = 0;
  int64_t last_rss = 0;
  for (const Event& e : Events(out)) {
    if (e.has_load()) {
      requests += e.load().requests_ok() + e.load().requests_failed();
      failed += e.load().requests_failed();
    }
    if (e.has_snapshot()) last_rss = e.snapshot().status().rss_bytes();
  }
  EXPECT_EQ(requests, 4300u);
  EXPECT_EQ(SummaryValue(out, "requests"), absl::StrCat(requests));
  EXPECT_EQ(SummaryValue(out, "errors"), absl::StrCat(failed));
  EXPECT_EQ(Requests(end), requests);
  EXPECT_EQ(end["rsslab_loadgen_request_latency_seconds_count"], requests);
  EXPECT_EQ(end["rsslab_loadgen_request_latency_seconds_bucket{le=\"+Inf\"}"], requests);
  EXPECT_EQ(end["rsslab_loadgen_errors_total"], failed);
  EXPECT_EQ(end["rsslab_loadgen_requests_in_flight"], 0);
  EXPECT_EQ(end["rsslab_loadgen_step"], 6);
  EXPECT_EQ(end["rsslab_loadgen_steps_total{result=\"ok\"}"], 6);
  EXPECT_EQ(end["rsslab_loadgen_steps_total{result=\"failed\"}"], 0);
  EXPECT_EQ(end["rsslab_loadgen_server_resident_memory_bytes"], last_rss);
  EXPECT_EQ(end["rsslab_loadgen_run_finished"], 1);
  // Every cumulative bucket holds at most all requests.
  for (const auto& [k, v] : end) {
    if (!absl::StartsWith(k, "rsslab_loadgen_request_latency_seconds_bucket")) continue;
    if (absl::StrContains(k, "+Inf")) continue;
    EXPECT_GE(v, 0);
    EXPECT_LE(v, requests) << k;
  }

  // Ctrl-C ends the hold; the run itself succeeded.
  kill(lg.pid(), SIGINT);
  EXPECT_EQ(lg.Wait(absl::Seconds(30)), 0) << lg.Stderr();
  EXPECT_EQ(Http(addr, "GET /metrics HTTP/1.1\r\n\r\n"), "connect failed");
}

TEST(LoadgenMetricsTest, BadMetricsFlagsAreUsageErrorsBeforeAnythingRuns) {
  // A port someone else holds.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  const std::string out = Tmp("metrics_taken");
  Child lg(Loadgen(), {"--target=127.0.0.1:1", "--control=", "--requests=10",
                       "--progress=lines", "--out=" + out, "--metrics_listen=" + taken});
  EXPECT_EQ(lg.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(lg.Stderr(), HasSubstr(absl::StrCat("cannot listen on ", taken)));
  EXPECT_THAT(lg.Stderr(), HasSubstr("(--metrics_listen)"));
  EXPECT_NE(access(out.c_str(), F_OK), 0) << "a run directory was created";
  close(fd);

  Child hold(Loadgen(), {"--target=127.0.0.1:1", "--control=", "--requests=10",
                         "--progress=lines", "--out=" + out, "--metrics_hold=10s"});
  EXPECT_EQ(hold.Wait(absl::Seconds(30)), 2);
  EXPECT_THAT(hold.Stderr(), HasSubstr("--metrics_hold needs --metrics_listen"));
  EXPECT_NE(access(out.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace rsslab
