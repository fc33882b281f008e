// Each allocator the shipped profiles preload, in the real server: the
// snapshot carries that allocator's own statistics (found with dlsym), and
// after the cache shrinks, the trim phase lowers RSS or the allocator's own
// resident figure. Without this a profile could silently report glibc's
// numbers, or a trim could run the wrong release call and free nothing.
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

TEST_P(AllocatorTrimTest, StatsPresentAndTrimAfterShrinkReleases) {
  absl::StatusOr<v1::ProfileSet> set =
      profiles::LoadProfiles(ServerProcess::Runfile("agent/profiles.textproto"));
  ASSERT_TRUE(set.ok()) << set.status();
  const v1::Profile* p = profiles::FindProfile(*set, GetParam());
  ASSERT_NE(p, nullptr) << GetParam();
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--threads=2", "--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0"};
  for (const auto& e : p->env()) o.env[e.name()] = e.value();
  if (!p->preload().empty()) o.env["LD_PRELOAD"] = p->preload();
  auto server = ServerProcess::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  Clients c(server->get());
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
  EXPECT_EQ((*server)->Stop(), 0);
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

}  // namespace
}  // namespace rsslab
