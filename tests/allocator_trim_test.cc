// Each allocator the shipped profiles preload, in the real server: the
// snapshot carries that allocator's own statistics (found with dlsym), and
// after the cache shrinks, the trim phase lowers RSS or the allocator's own
// resident figure. Without this a profile could silently report glibc's
// numbers, or a trim could run the wrong release call and free nothing.
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/profiles.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/clients.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Clients;
using ::rsslab::testing::Params;
using ::rsslab::testing::ServerProcess;
constexpr int64_t kMiB = 1 << 20;

class AllocatorTrimTest : public ::testing::TestWithParam<const char*> {};

// ~24 MiB of 16 KiB bodies, all stored, from 4 client threads: enough to
// leave freed memory in every allocator once the cache shrinks to 1 MiB,
// small enough to stay under mmap thresholds (so the frees land in the heap).
int Fill(Clients& c) {
  return c.Drive(1600, 4, /*seed0=*/1, [](int) {
    return Params{{"median", "16384"}, {"sigma", "0.1"}, {"store_p", "1"}, {"dict_items", "10"}};
  });
}

// A 2-worker server under the shipped profile `name`, its preload and
// environment set before it starts, as the launcher sets them.
void StartUnder(const std::string& name, v1::Profile* profile,
                std::unique_ptr<ServerProcess>* server) {
  absl::StatusOr<v1::ProfileSet> set =
      profiles::LoadProfiles(ServerProcess::Runfile("agent/profiles.textproto"));
  ASSERT_TRUE(set.ok()) << set.status();
  const v1::Profile* p = profiles::FindProfile(*set, name);
  ASSERT_NE(p, nullptr) << name;
  *profile = *p;
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--threads=2", "--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0"};
  for (const auto& e : p->env()) o.env[e.name()] = e.value();
  if (!p->preload().empty()) o.env["LD_PRELOAD"] = p->preload();
  auto started = ServerProcess::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  *server = std::move(*started);
}

TEST_P(AllocatorTrimTest, StatsPresentAndTrimAfterShrinkReleases) {
  v1::Profile profile;
  std::unique_ptr<ServerProcess> server;
  StartUnder(GetParam(), &profile, &server);
  if (::testing::Test::HasFatalFailure()) return;
  const v1::Profile* p = &profile;
  Clients c(server.get());
  auto phase = [&](const std::string& name, int64_t limit) {
    v1::SetPhaseResponse resp;
    grpc::Status s = c.SetPhase(name, &resp, limit, /*gc=*/true);
    EXPECT_TRUE(s.ok()) << name << ": " << s.error_message();
    return resp;
  };
  phase("fill", 100 * kMiB);
  ASSERT_EQ(Fill(c), 0);
  v1::SetPhaseResponse shrunk = phase("shrink", 1 * kMiB);
  const v1::Snapshot& snap = shrunk.snapshot();
  ASSERT_EQ(snap.allocator(), p->allocator());
  ASSERT_GT(snap.cache().evicted_bytes(), 16 * kMiB) << "the fill did not reach the cache";

  // The allocator's own figures, not glibc's, whichever is loaded.
  const v1::AllocatorStats& st = snap.allocator_stats();
  // (st.note explains figures an allocator does not keep; not an error.)
  const std::string a = p->allocator();
  if (a == "glibc") {
    EXPECT_GT(st.glibc().arena(), 0);
    EXPECT_GT(st.glibc().uordblks(), 0);
    EXPECT_GE(st.glibc().malloc_info_arenas(), 1);
  } else if (a == "jemalloc") {
    EXPECT_FALSE(st.jemalloc().version().empty());
    EXPECT_GT(st.jemalloc().allocated(), 0);
    EXPECT_GT(st.jemalloc().resident(), 0);
    EXPECT_GT(st.jemalloc().narenas(), 0);
  } else if (a == "mimalloc") {
    EXPECT_GT(st.mimalloc().version(), 0);
    EXPECT_GT(st.mimalloc().current_rss(), 0);
    EXPECT_GT(st.mimalloc().current_commit(), 0);
  } else if (a == "tcmalloc") {
    EXPECT_GT(st.tcmalloc().current_allocated_bytes(), 0);
    EXPECT_GT(st.tcmalloc().heap_size(), 0);
  } else {
    FAIL() << "unexpected allocator " << a;
  }

  v1::SetPhaseResponse trimmed = phase("trim", -1);
  const v1::TrimResult& t = trimmed.trim();
  EXPECT_FALSE(t.call().empty());
  EXPECT_EQ(t.allocator(), a);
  const bool rss_fell = t.rss_after_bytes() < t.rss_before_bytes();
  const bool resident_fell = t.allocator_resident_before() > 0 &&
                             t.allocator_resident_after() < t.allocator_resident_before();
  EXPECT_TRUE(rss_fell || resident_fell)
      << a << " " << t.call() << ": rss " << t.rss_before_bytes() << " -> "
      << t.rss_after_bytes() << ", allocator resident " << t.allocator_resident_before()
      << " -> " << t.allocator_resident_after();
  EXPECT_EQ(server->Stop(), 0);
}

// mimalloc-purge0: with mimalloc's default 25 ms decommit delay whether the
// pages are gone when the "after" figure is read is a race.
INSTANTIATE_TEST_SUITE_P(Shipped, AllocatorTrimTest,
                         ::testing::Values("glibc", "jemalloc", "mimalloc-purge0", "tcmalloc"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

// TRIM_FREE_BLOCK_PURGE: under mimalloc (2.0.9 here) each worker, after its
// own release, returns the OS pages inside its heap's free blocks, which a
// per-thread trim leaves on every page a live block pins.
// Under glibc the mode is the default trim and says the purge did not run.
class FreeBlockPurgeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(FreeBlockPurgeTest, PurgeModeReturnsWhatThePerThreadTrimLeaves) {
  v1::Profile profile;
  std::unique_ptr<ServerProcess> server;
  StartUnder(GetParam(), &profile, &server);
  if (::testing::Test::HasFatalFailure()) return;
  const v1::Profile* p = &profile;
  Clients c(server.get());
  v1::SetPhaseResponse resp;
  // The seed's body sizes (lognormal, median 4 KiB) through a 20 MiB cache
  // that churns: the survivors of the shrink pin pages whose other blocks
  // are free, spread over every size class.
  ASSERT_TRUE(c.SetPhase("fill", &resp, 20 * kMiB, /*gc=*/true).ok());
  ASSERT_EQ(c.Drive(8000, 4, /*seed0=*/1, [](int) { return Params{{"store_p", "0.3"}}; }), 0);
  ASSERT_TRUE(c.SetPhase("shrink", &resp, 2 * kMiB, /*gc=*/true).ok());
  ASSERT_EQ(resp.snapshot().allocator(), p->allocator());

  const v1::TrimResult per_thread = c.Trim(v1::TRIM_PER_THREAD, /*gc=*/true);
  EXPECT_FALSE(per_thread.has_free_block_purge()) << "only the purge mode purges";
  const v1::TrimResult purge = c.Trim(v1::TRIM_FREE_BLOCK_PURGE);
  ASSERT_TRUE(purge.has_free_block_purge());
  const v1::FreeBlockPurgeResult& f = purge.free_block_purge();
  if (p->allocator() != "mimalloc") {
    EXPECT_FALSE(f.ran());
    EXPECT_FALSE(f.note().empty());
    EXPECT_TRUE(purge.per_thread()) << "elsewhere the purge mode is the default trim";
  } else {
    EXPECT_TRUE(f.ran()) << f.note();
    EXPECT_GT(f.ranges(), 0);
    EXPECT_EQ(f.failed(), 0);
    EXPECT_GT(f.bytes(), 1 * kMiB) << "pages inside the free blocks around the survivors";
    EXPECT_LT(purge.rss_after_bytes(), per_thread.rss_after_bytes() - 1 * kMiB)
        << "the per-thread trim left " << per_thread.rss_after_bytes() << " bytes, the purge "
        << purge.rss_after_bytes();
  }
  std::printf("%s: per-thread trim -> %.1f MiB, then the purge mode -> %.1f MiB (%.1f MiB in %lld "
              "ranges)\n", GetParam(), per_thread.rss_after_bytes() / 1048576.0,
              purge.rss_after_bytes() / 1048576.0, f.bytes() / 1048576.0,
              static_cast<long long>(f.ranges()));
  EXPECT_EQ(server->Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Shipped, FreeBlockPurgeTest, ::testing::Values("glibc", "mimalloc"));

}  // namespace
}  // namespace rsslab
