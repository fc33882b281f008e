// Trim end to end on the real server binary (loopback, ephemeral ports):
// the per-thread pass reaches every worker and frees what the global release
// cannot under mimalloc; trims under load fail no request; --auto_trim
// fires after a burst and not during steady load (default knobs).

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/profiles.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/clients.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;
constexpr int64_t kMiB = 1 << 20;

// One installed mimalloc version: its profiles (agent/profiles.textproto, so
// the library path is the one the profiles use: Debian 12's 2.0.9, or the
// 3.0.1 that ./rsslab setup unpacks into .deps/) and what its trim does.
struct MimallocVersion {
  const char* name;             // test name suffix
  const char* profile;          // defaults
  const char* purge0_profile;   // immediate release
  const char* delay_option;     // the trim's release_delay_option
  int64_t default_delay;        // its default, ms
  const char* follow_up_call;   // the second visit (2.x only)
  const char* after_restore;    // the forced purge after restoring (3.x only)
  const char* thread_call;      // each worker's release
  bool commit_counter;          // its committed bytes are reported
};

const MimallocVersion kVersions[] = {
    {"v2_0_9", "mimalloc", "mimalloc-purge0", "mimalloc decommit_delay", 25,
     "mi_malloc(256 KiB)+mi_free", "", "mi_collect(true)", true},
    {"v3_0_1", "mimalloc3", "mimalloc3-purge0", "mimalloc purge_delay", 2500, "",
     "mi_collect(true)", "mi_collect(true)+madvise(page tails)", false},
};

// The profile's environment (LD_PRELOAD included), or a skip reason.
absl::StatusOr<std::map<std::string, std::string>> ProfileEnv(const char* name) {
  absl::StatusOr<rsslab::v1::ProfileSet> set =
      profiles::LoadProfiles(ServerProcess::Runfile("agent/profiles.textproto"));
  if (!set.ok()) return set.status();
  const rsslab::v1::Profile* p = profiles::FindProfile(*set, name);
  if (p == nullptr) return absl::NotFoundError(absl::StrCat("no profile ", name));
  if (!p->unavailable().empty()) {
    return absl::UnavailableError(absl::StrCat(name, ": ", p->unavailable()));
  }
  std::map<std::string, std::string> env;
  for (const auto& e : p->env()) env[e.name()] = e.value();
  env["LD_PRELOAD"] = p->preload();
  return env;
}

class MimallocTrimTest : public ::testing::TestWithParam<MimallocVersion> {};

std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> extra,
                                           std::map<std::string, std::string> env = {}) {
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  o.env = std::move(env);
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

struct Clients : rsslab::testing::Clients {
  using rsslab::testing::Clients::Clients;
  // No gc: the test controls what Python frees.
  void Phase(const std::string& phase) { rsslab::testing::Clients::Phase(phase, /*gc=*/false); }
};

// Every worker ran the release, once, on its own thread.
void ExpectEveryWorkerRan(const rsslab::v1::TrimResult& t, int threads) {
  ASSERT_EQ(t.workers_size(), threads);
  std::set<int> tids;
  for (const rsslab::v1::WorkerTrim& w : t.workers()) {
    EXPECT_TRUE(w.ran()) << "worker " << w.worker() << ": " << w.error();
    EXPECT_GT(w.tid(), 0);
    tids.insert(w.tid());
  }
  EXPECT_EQ(tids.size(), static_cast<size_t>(threads)) << "workers share a thread?";
}

// DESIGN.md: mimalloc's heaps are per thread, so the global mi_collect
// leaves what idle workers hold; the per-thread pass gives it back. Decommit
// delay 0 as in the measurement there (with mimalloc's default 25 ms delay,
// free spans inside live segments stay committed: docs/TRIM.md).
TEST_P(MimallocTrimTest, PerThreadTrimFreesWhatGlobalCannot16Threads) {
  auto env = ProfileEnv(GetParam().purge0_profile);
  if (!env.ok()) GTEST_SKIP() << env.status().message();
  constexpr int kThreads = 16;
  auto server = StartServer({absl::StrCat("--threads=", kThreads)}, *env);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  ASSERT_EQ(c.Snapshot().allocator(), "mimalloc");
  c.Phase("fill");
  ASSERT_EQ(c.Drive(16000, 16, 1), 0);
  c.Phase("shrink");
  ASSERT_EQ(c.Drive(8000, 16, 1000000), 0);
  c.Phase("idle");
  // Global first, then per-thread, in one trim: rss_between is what the
  // global release alone reached.
  rsslab::v1::TrimResult t = c.Trim(rsslab::v1::TRIM_MODE_DEFAULT, /*gc=*/true);
  EXPECT_EQ(t.call(), "mi_collect(true)");
  EXPECT_TRUE(t.per_thread());
  ExpectEveryWorkerRan(t, kThreads);
  EXPECT_GE(t.per_thread_freed_bytes(), 8 * kMiB)
      << "between " << t.rss_between_bytes() << " after " << t.rss_after_bytes();
  EXPECT_GT(t.per_thread_freed_bytes(), 4 * std::max<int64_t>(t.global_freed_bytes(), kMiB));
  EXPECT_LT(t.rss_after_bytes(), t.rss_between_bytes());
  if (GetParam().commit_counter) {
    EXPECT_LT(t.allocator_resident_after(), t.allocator_resident_between());
  } else {
    // 3.0.1's committed counter is refused (it went negative here, with
    // purge_delay 0, before it was): no resident figure rather than a wrong one.
    EXPECT_EQ(t.allocator_resident_after(), -1);
    EXPECT_THAT(c.Snapshot().allocator_stats().mimalloc().refused(),
                ::testing::Contains(::testing::HasSubstr("current_commit")));
  }
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

// The default `mimalloc` profile (LD_PRELOAD only: decommit delay 25 ms).
// A span freed while the delay is > 0 is only scheduled for decommit, and an
// idle worker never carries that out; mi_collect cannot either, and the
// second visit alone mostly just pushes the expiry back. The trim now holds
// the delay at 0, collects on every worker and visits each once more (one
// large alloc + free, which decommits at once every span it coalesces
// with), then restores the delay. The load: fill to 150 MiB with every
// response stored, shrink to 10 MiB (evicted at once), idle. With the
// previous trim (delay untouched, visit after 31 ms) the same run went
// 241 -> 186 and 243 -> 203 MiB (docs/TRIM.md); with this one 240 -> 82.
//
// mimalloc 3.0.1 (docs/TRIM.md): no per-thread segments, so no second visit;
// purge_delay (2500 ms) held at 0 makes each worker's collect purge the
// pages it frees at once, and one forced mi_collect after the delay is back
// purges what was scheduled before (3.x skips forced purges at delay 0);
// each worker also drops its live pages' never-used tails, which a page
// carved from slices not yet purged keeps resident (alloc.h PurgePageTails).
TEST_P(MimallocTrimTest, PerThreadTrimHalvesDefaultAfterIdle16Threads) {
  const MimallocVersion& v = GetParam();
  auto env = ProfileEnv(v.profile);
  if (!env.ok()) GTEST_SKIP() << env.status().message();
  constexpr int kThreads = 16;
  auto server = StartServer({absl::StrCat("--threads=", kThreads), "--handler_params=store_p=1"},
                            *env);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  const std::string option = std::string(v.delay_option).substr(std::string("mimalloc ").size());
  rsslab::v1::Snapshot s = c.Snapshot();
  ASSERT_EQ(s.allocator(), "mimalloc");
  ASSERT_EQ(s.allocator_stats().mimalloc().options().at(option), v.default_delay)
      << "not mimalloc's default profile";
  rsslab::v1::SetPhaseResponse fill;
  ASSERT_TRUE(c.SetPhase("fill", &fill, /*limit=*/150 * kMiB, /*gc=*/false).ok());
  ASSERT_EQ(c.Drive(15000, 16, 1), 0);  // ~1.6x the limit: the cache churns
  c.Phase("shrink");
  c.Phase("idle");
  const int64_t after_idle = c.Snapshot().status().rss_bytes();
  rsslab::v1::TrimResult t = c.Trim(rsslab::v1::TRIM_MODE_DEFAULT);
  ExpectEveryWorkerRan(t, kThreads);
  EXPECT_EQ(t.release_delay_option(), v.delay_option);
  EXPECT_TRUE(t.release_delay_overridden());
  EXPECT_EQ(t.release_delay_before(), v.default_delay);
  EXPECT_EQ(t.release_delay_during(), 0);
  EXPECT_EQ(t.release_delay_after(), v.default_delay);
  EXPECT_EQ(t.follow_up_call(), v.follow_up_call);
  EXPECT_EQ(t.after_restore_call(), v.after_restore);
  EXPECT_EQ(t.thread_call(), v.thread_call);
  std::cout << v.profile << ": after idle " << after_idle / kMiB << " MiB, trim "
            << t.rss_before_bytes() / kMiB << " -> " << t.rss_between_bytes() / kMiB
            << " (global) -> " << t.rss_after_bytes() / kMiB << " MiB (per-thread)\n";
  EXPECT_LE(t.rss_after_bytes(), after_idle / 2)
      << "after idle " << after_idle / kMiB << " MiB, trim " << t.rss_before_bytes() / kMiB
      << " -> " << t.rss_between_bytes() / kMiB << " (global) -> " << t.rss_after_bytes() / kMiB
      << " MiB (per-thread)";
  // Restored: the process runs on with its profile's delay.
  EXPECT_EQ(c.Snapshot().allocator_stats().mimalloc().options().at(option), v.default_delay);
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

INSTANTIATE_TEST_SUITE_P(Installed, MimallocTrimTest, ::testing::ValuesIn(kVersions),
                         [](const ::testing::TestParamInfo<MimallocVersion>& i) {
                           return std::string(i.param.name);
                         });

// Trims of every mode while 8 clients keep 4 workers busy: no request
// fails, and busy workers still take part (between their requests).
TEST(TrimTest, TrimsDuringLoadFailNoRequest) {
  auto server = StartServer({"--threads=4"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  c.Phase("fill");
  std::atomic<bool> done{false};
  int failed = -1;
  std::thread load([&] {
    failed = c.Drive(8000, 8, 1);
    done = true;
  });
  const rsslab::v1::TrimMode modes[] = {rsslab::v1::TRIM_MODE_DEFAULT,
                                        rsslab::v1::TRIM_GLOBAL_ONLY,
                                        rsslab::v1::TRIM_PER_THREAD};
  int trims = 0;
  while (!done) {
    rsslab::v1::TrimResult t = c.Trim(modes[trims % 3]);
    if (t.per_thread()) ExpectEveryWorkerRan(t, 4);
    ++trims;
  }
  load.join();
  EXPECT_EQ(failed, 0);
  EXPECT_GE(trims, 3) << "load finished before trims overlapped it";
  rsslab::v1::Snapshot s = c.Snapshot();
  EXPECT_EQ(s.handler_errors(), 0u);
  EXPECT_EQ(s.trims_total(), static_cast<uint64_t>(trims));
  EXPECT_EQ(s.recent_trims_size(), std::min(trims, 16));
  EXPECT_EQ(s.auto_trims_total(), 0u);
  EXPECT_EQ(s.config().auto_trim(), "off");
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

// --auto_trim=after_burst with default knobs: steady load for longer than
// the settle time fires nothing even with a large gap; once the load stops
// it trims (once), on every worker, without a manual call.
TEST(TrimTest, AutoTrimFiresAfterBurstNotDuringSteadyLoad) {
  auto server = StartServer({"--threads=4", "--auto_trim=after_burst"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  EXPECT_EQ(c.Snapshot().config().auto_trim(), "after_burst");
  c.Phase("fill");
  ASSERT_EQ(c.Drive(12000, 8, 1), 0);
  c.Phase("shrink");  // evicts ~90 MiB: a large gap from here on

  // Steady closed-loop load for 6 s (3x the 2 s settle time).
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (uint64_t i = 0; !stop; ++i) {
        if (!c.Handle(1000000 + t * 1000000 + i).ok()) ++failed;
      }
    });
  }
  int64_t max_gap = 0;
  absl::Time end = absl::Now() + absl::Seconds(6);
  while (absl::Now() < end) {
    rsslab::v1::Snapshot s = c.Snapshot();
    max_gap = std::max(max_gap, s.auto_trim().gap_bytes());
    EXPECT_EQ(s.auto_trims_total(), 0u) << "auto trim during steady load, rate "
                                        << s.auto_trim().rate();
    absl::SleepFor(absl::Milliseconds(250));  // sampling cadence, not a wait
  }
  rsslab::v1::Snapshot under_load = c.Snapshot();
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(under_load.auto_trims_total(), 0u);
  // Otherwise the test proves nothing: the policy would not have fired anyway.
  EXPECT_GE(max_gap, under_load.auto_trim().gap_threshold_bytes())
      << "gap never exceeded the threshold during load";
  EXPECT_GT(under_load.auto_trim().rate(), 0);

  // Load stopped: wait (bounded) for the automatic trim.
  rsslab::v1::Snapshot s;
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    s = c.Snapshot();
    if (s.auto_trims_total() > 0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(s.auto_trims_total(), 1u) << "no auto trim after the burst; gap "
                                      << s.auto_trim().gap_bytes();
  ASSERT_GE(s.recent_trims_size(), 1);
  const rsslab::v1::TrimResult& t = s.recent_trims(s.recent_trims_size() - 1);
  EXPECT_EQ(t.trigger(), "auto_after_burst");
  EXPECT_TRUE(t.per_thread());
  ExpectEveryWorkerRan(t, 4);
  EXPECT_GT(t.freed_bytes(), 0);
  EXPECT_EQ(s.trims_total(), 1u);
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

}  // namespace
}  // namespace rsslab
