// --metrics_listen end to end: the real server, scraped over HTTP by this
// test, checked against a Control snapshot taken right after the scrape.

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/scrape.h"
#include "tests/clients.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Body;
using ::rsslab::testing::Http;
using ::rsslab::testing::ParseExposition;
using ::rsslab::testing::ServerProcess;

std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> extra) {
  auto s = ServerProcess::Start(ServerProcess::TestServer(std::move(extra)));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

struct Clients : rsslab::testing::Clients {
  using rsslab::testing::Clients::Clients;
  // n requests over 4 client threads, each storing `store` bytes;
  // `raise_every` > 0 makes every such request raise in the handler.
  // Returns the number that failed.
  int Drive(int n, int raise_every = 0, int store = 2000) {
    return rsslab::testing::Clients::Drive(n, 4, /*seed0=*/1, [=](int i) {
      rsslab::testing::Params p = {{"store", absl::StrCat(store)}};
      if (raise_every > 0 && i % raise_every == 0) p["raise"] = "1";
      return p;
    });
  }
};

TEST(MetricsTest, ScrapeAgreesWithControlSnapshot) {
  auto server = StartServer({"--threads=2", "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(absl::StartsWith(server->metrics_address(), "127.0.0.1:"))
      << server->metrics_address();
  Clients c(server.get());
  c.Phase("fill");
  EXPECT_EQ(c.Drive(300, /*raise_every=*/50), 6);
  c.Phase("shrink");
  EXPECT_EQ(c.Drive(100), 0);
  c.Phase("trim");

  std::string resp = Http(server->metrics_address(), "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
  rsslab::v1::Snapshot snap = c.Snapshot();
  ASSERT_TRUE(absl::StartsWith(resp, "HTTP/1.1 200 OK\r\n")) << resp.substr(0, 200);
  EXPECT_TRUE(absl::StrContains(resp, "Content-Type: text/plain; version=0.0.4")) << resp;
  std::map<std::string, double> m = ParseExposition(Body(resp));

  // Counters: exact (nothing ran between the scrape and the snapshot).
  EXPECT_EQ(m["rsslab_requests_total{phase=\"fill\"}"], 300);
  EXPECT_EQ(m["rsslab_requests_total{phase=\"shrink\"}"], 100);
  EXPECT_EQ(m["rsslab_requests_total{phase=\"start\"}"], 0);
  EXPECT_EQ(m["rsslab_handler_errors_total{phase=\"fill\"}"], 6);
  EXPECT_EQ(m["rsslab_handler_errors_total{phase=\"shrink\"}"], 0);
  EXPECT_EQ(snap.requests_served(), 400u);
  EXPECT_EQ(snap.handler_errors(), 6u);
  EXPECT_EQ(m["rsslab_phase{phase=\"trim\"}"], 1);
  EXPECT_EQ(m["rsslab_handler_latency_seconds_count"], snap.requests_served());
  EXPECT_EQ(m["rsslab_handler_latency_seconds_bucket{le=\"+Inf\"}"], snap.requests_served());
  EXPECT_GT(m["rsslab_handler_latency_seconds_sum"], 0);
  double previous = 0;
  for (const char* le : {"0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
                         "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}) {
    std::string key = absl::StrCat("rsslab_handler_latency_seconds_bucket{le=\"", le, "\"}");
    ASSERT_TRUE(m.count(key)) << key;
    EXPECT_GE(m[key], previous) << key;
    previous = m[key];
  }
  EXPECT_EQ(m["rsslab_cache_entries"], snap.cache().cache_entries());
  EXPECT_EQ(m["rsslab_cache_bytes"], snap.cache().cache_bytes());
  EXPECT_EQ(m["rsslab_cache_limit_bytes"], snap.cache().cache_limit_bytes());
  EXPECT_EQ(m["rsslab_cache_evictions_total"], snap.cache().evictions());
  EXPECT_GT(snap.cache().cache_entries(), 0);
  EXPECT_EQ(m["rsslab_worker_threads_started_total"], snap.workers().threads_started());
  EXPECT_EQ(m["rsslab_trims_total"], snap.trims_total());
  EXPECT_EQ(snap.trims_total(), 1u);
  EXPECT_EQ(m["rsslab_last_trim_freed_bytes"], snap.last_trim().freed_bytes());
  EXPECT_DOUBLE_EQ(m["rsslab_last_trim_duration_seconds"],
                   (snap.last_trim().trim_duration_us() +
                    snap.last_trim().per_thread_duration_us()) / 1e6);
  EXPECT_EQ(m["rsslab_trims_by_trigger_total{trigger=\"phase\"}"], 1);
  EXPECT_EQ(m["rsslab_trims_by_trigger_total{trigger=\"auto_after_burst\"}"], 0);
  EXPECT_EQ(m["rsslab_auto_trims_total"], 0);
  EXPECT_EQ(m["rsslab_allocator_info{allocator=\"glibc\",library=\"" +
              snap.allocator_library() + "\"}"],
            1);

  // Gauges that move on their own: within tolerance.
  const double rss = snap.status().rss_bytes();
  EXPECT_NEAR(m["rsslab_process_resident_memory_bytes"], rss, std::max(4.0 * (1 << 20), 0.1 * rss));
  EXPECT_NEAR(m["rsslab_process_anon_memory_bytes"], snap.status().anon_bytes(), 4.0 * (1 << 20));
  EXPECT_GE(m["rsslab_process_resident_memory_max_bytes"], m["rsslab_process_resident_memory_bytes"]);
  EXPECT_NEAR(m["rsslab_process_threads"], snap.status().threads(), 3);
  EXPECT_NEAR(m["rsslab_glibc_arenas"], snap.memory_map().arena_count(), 2);
  EXPECT_GT(m["rsslab_glibc_arenas"], 0);
  EXPECT_NEAR(m["rsslab_glibc_arena_resident_bytes"], snap.memory_map().arena_rss_bytes(),
              4.0 * (1 << 20));
  EXPECT_TRUE(m.count("rsslab_allocator_allocated_bytes{allocator=\"glibc\"}"));

  // The metrics thread is there, named.
  int named = 0;
  std::string task = absl::StrCat("/proc/", server->pid(), "/task");
  DIR* d = opendir(task.c_str());
  while (dirent* e = readdir(d)) {
    std::ifstream f(absl::StrCat(task, "/", e->d_name, "/comm"));
    std::string comm;
    if (std::getline(f, comm) && comm == "rsslab-metrics") ++named;
  }
  closedir(d);
  EXPECT_EQ(named, 1);
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

// An automatic trim (no manual call) shows in the counters and gauges, and
// they agree with the snapshot's recent_trims, trigger by trigger.
TEST(MetricsTest, AutomaticTrimIsCountedAndAgreesWithRecentTrims) {
  // after_burst with a short settle and no gap threshold: it fires once the
  // burst below has stopped for 300 ms, then stays disarmed (no new burst),
  // so nothing changes between the scrape and the snapshot.
  auto server = StartServer({"--threads=4", "--metrics_listen=127.0.0.1:0",
                             "--auto_trim=after_burst", "--auto_trim_gap_mb=0",
                             "--auto_trim_settle_ms=300", "--auto_trim_min_spacing_s=1"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  const std::string addr = server->metrics_address();
  auto scrape = [&] {
    std::string resp = Http(addr, "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_TRUE(absl::StartsWith(resp, "HTTP/1.1 200 OK\r\n")) << resp.substr(0, 200);
    return ParseExposition(Body(resp));
  };
  std::map<std::string, double> before = scrape();
  for (const char* t : {"manual", "phase", "auto_after_burst", "auto_interval"}) {
    std::string key = absl::StrCat("rsslab_trims_by_trigger_total{trigger=\"", t, "\"}");
    ASSERT_TRUE(before.count(key)) << key;  // every trigger has a series from the start
    EXPECT_EQ(before[key], 0) << key;
  }
  EXPECT_FALSE(before.count("rsslab_last_trim_max_worker_pause_seconds"));

  c.Phase("fill");
  EXPECT_EQ(c.Drive(1500, 0, /*store=*/30000), 0);  // ~43 MiB cached
  c.Phase("shrink");                                  // 10 MiB: evicts most
  rsslab::v1::Snapshot snap;
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  do {
    absl::SleepFor(absl::Milliseconds(200));
    snap = c.Snapshot();
  } while (snap.auto_trims_total() == 0 && absl::Now() < deadline);
  ASSERT_EQ(snap.auto_trims_total(), 1u)
      << "served " << snap.requests_served() << ", policy: " << snap.auto_trim().ShortDebugString();
  {
    rsslab::v1::TrimRequest req;  // and one manual trim after it
    rsslab::v1::TrimResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(c.control->Trim(&ctx, req, &resp).ok());
  }

  std::map<std::string, double> m = scrape();
  snap = c.Snapshot();
  ASSERT_EQ(snap.recent_trims_size(), 2);
  EXPECT_EQ(snap.recent_trims(0).trigger(), "auto_after_burst");
  EXPECT_EQ(snap.recent_trims(1).trigger(), "manual");
  EXPECT_EQ(m["rsslab_trims_total"], 2);
  EXPECT_EQ(m["rsslab_auto_trims_total"], snap.auto_trims_total());
  std::map<std::string, double> count, freed, duration, pause;
  for (const rsslab::v1::TrimResult& t : snap.recent_trims()) {
    count[t.trigger()] += 1;
    freed[t.trigger()] += std::max<int64_t>(0, t.freed_bytes());
    duration[t.trigger()] += (t.trim_duration_us() + t.per_thread_duration_us()) / 1e6;
    pause[t.trigger()] += t.max_worker_pause_us() / 1e6;
    // The automatic trim reached every worker.
    EXPECT_EQ(t.workers_size(), 4) << t.trigger();
    for (const auto& w : t.workers()) EXPECT_TRUE(w.ran()) << t.trigger();
  }
  for (const char* t : {"manual", "phase", "auto_after_burst", "auto_interval"}) {
    std::string label = absl::StrCat("{trigger=\"", t, "\"}");
    EXPECT_EQ(m["rsslab_trims_by_trigger_total" + label], count[t]) << t;
    EXPECT_EQ(m["rsslab_trim_freed_bytes_total" + label], freed[t]) << t;
    EXPECT_NEAR(m["rsslab_trim_duration_seconds_total" + label], duration[t], 1e-9) << t;
    EXPECT_NEAR(m["rsslab_trim_worker_pause_seconds_total" + label], pause[t], 1e-9) << t;
  }
  EXPECT_EQ(count["auto_after_burst"], 1);
  EXPECT_GT(duration["auto_after_burst"], 0);
  EXPECT_GT(freed["auto_after_burst"] + freed["manual"], 0);  // the shrink left memory to give back

  const rsslab::v1::TrimResult& last = snap.last_trim();
  EXPECT_EQ(m["rsslab_last_trim_info{trigger=\"manual\",allocator=\"glibc\"}"], 1);
  EXPECT_EQ(m["rsslab_last_trim_freed_bytes"], last.freed_bytes());
  EXPECT_DOUBLE_EQ(m["rsslab_last_trim_max_worker_pause_seconds"],
                   last.max_worker_pause_us() / 1e6);
  EXPECT_DOUBLE_EQ(m["rsslab_last_trim_duration_seconds"],
                   (last.trim_duration_us() + last.per_thread_duration_us()) / 1e6);
  EXPECT_DOUBLE_EQ(m["rsslab_last_trim_timestamp_seconds"], last.unix_nanos() / 1e9);
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

TEST(MetricsTest, OtherPathsConcurrentScrapesAndLoad) {
  auto server = StartServer({"--threads=2", "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(server, nullptr);
  const std::string addr = server->metrics_address();
  EXPECT_TRUE(absl::StartsWith(Http(addr, "GET / HTTP/1.1\r\n\r\n"), "HTTP/1.1 404"));
  EXPECT_TRUE(absl::StartsWith(Http(addr, "PUT /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 405"));
  EXPECT_TRUE(absl::StartsWith(Http(addr, "garbage\r\n\r\n"), "HTTP/1.1 400"));
  Clients c(server.get());
  c.Phase("fill");
  std::atomic<bool> done{false};
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> scrapers;
  for (int i = 0; i < 3; ++i) {
    scrapers.emplace_back([&] {
      while (!done) {
        std::string r = Http(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        if (absl::StartsWith(r, "HTTP/1.1 200 OK") &&
            absl::StrContains(r, "rsslab_handler_latency_seconds_count ")) {
          ++ok;
        } else {
          ++bad;
        }
      }
    });
  }
  EXPECT_EQ(c.Drive(300), 0);
  done = true;
  for (auto& t : scrapers) t.join();
  EXPECT_GT(ok.load(), 3);
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

TEST(MetricsTest, OffByDefaultAndTakenPortIsNamed) {
  auto plain = StartServer({"--threads=1"});
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->metrics_address(), "");

  auto first = StartServer({"--threads=1", "--metrics_listen=127.0.0.1:0"});
  ASSERT_NE(first, nullptr);
  const std::string taken = first->metrics_address();
  ServerProcess::Result r = ServerProcess::Run(
      ServerProcess::Runfile("server/rsslab_server"),
      {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0", "--metrics_listen=" + taken});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, absl::StrCat("rsslab_server: cannot listen on ", taken,
                                ": Address already in use (--metrics_listen)\n"));
}

}  // namespace
}  // namespace rsslab
