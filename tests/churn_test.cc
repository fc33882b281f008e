// Seed 002 on the real server: --thread_mode=churn replaces worker threads
// after --churn_every requests; the snapshot shows how many worker threads
// were started and how many glibc arenas exist.
//
// Measured finding (glibc 2.36): churn alone does NOT grow the arena count.
// A thread that exits puts its arena on glibc's free list and the next new
// thread takes it from there (arena_get2 -> get_free_list) before creating
// one; our pool's replacement joins its predecessor before its first
// malloc, so 100 replacements reuse the same arenas (fixed 19, churn 18,
// churn_every=1 with 1000 threads: 20, cap raised to 64). Seed 002's 164
// arenas came from threads that were all *alive* at once (leaked executor
// threads), not from threads that came and went. So these tests pin down
// what holds: churn starts many threads, the arena count stays within the
// fixed count plus the pool size, and under MALLOC_ARENA_MAX=2 it is at
// most 2 whatever the churn.
//
// The cap is raised for the comparison: on a 2-core machine glibc's default
// cap is 8 x 2 = 16 arenas and gRPC's own threads take most of them at
// start, which would hide any difference.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;

constexpr int kThreads = 4;
constexpr int kRequests = 400;
constexpr int kChurnEvery = 10;

struct Outcome {
  int arenas = 0;
  uint64_t threads_started = 0;
  int alive = 0;
  std::string allocator_env;
};

Outcome RunServer(const std::string& mode, const std::string& arena_max) {
  Outcome out;
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
            absl::StrCat("--threads=", kThreads), "--thread_mode=" + mode,
            absl::StrCat("--churn_every=", kChurnEvery)};
  // Set before the process starts: glibc reads it once, before main.
  o.env["MALLOC_ARENA_MAX"] = arena_max;
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return out;
  auto channel_load = grpc::CreateChannel((*s)->data_address(), grpc::InsecureChannelCredentials());
  auto load = rsslab::v1::Load::NewStub(channel_load);
  auto control = rsslab::v1::Control::NewStub(
      grpc::CreateChannel((*s)->control_address(), grpc::InsecureChannelCredentials()));
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2 * kThreads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < kRequests; i = next++) {
        rsslab::v1::HandleRequest req;
        req.set_id(i);
        req.set_seed(i + 1);
        rsslab::v1::HandleResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        if (!load->Handle(&ctx, req, &resp).ok()) ++failed;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(failed.load(), 0);
  rsslab::v1::SnapshotRequest req;
  rsslab::v1::Snapshot snap;
  grpc::ClientContext ctx;
  EXPECT_TRUE(control->GetSnapshot(&ctx, req, &snap).ok());
  out.arenas = snap.memory_map().arena_count();
  out.threads_started = snap.workers().threads_started();
  out.alive = snap.workers().alive();
  auto env = snap.allocator_env().find("MALLOC_ARENA_MAX");
  if (env != snap.allocator_env().end()) out.allocator_env = env->second;
  EXPECT_EQ((*s)->Stop(), 0) << (*s)->Stderr();
  return out;
}

TEST(ChurnTest, ChurnStartsThreadsButGlibcReusesTheirArenas) {
  Outcome fixed = RunServer("fixed", "64");
  Outcome churn = RunServer("churn", "64");
  EXPECT_EQ(fixed.allocator_env, "64");
  EXPECT_EQ(fixed.threads_started, static_cast<uint64_t>(kThreads));
  // Every worker is replaced after kChurnEvery requests; the last
  // generation may not have reached its quota.
  EXPECT_GE(churn.threads_started, static_cast<uint64_t>(kRequests / kChurnEvery));
  // A slot being replaced at the moment of the snapshot may read as not
  // alive (seen once: 3 of 4).
  EXPECT_GE(churn.alive, kThreads - 1);
  EXPECT_LE(churn.alive, kThreads);
  // Ten times as many worker threads, yet at most one extra arena per
  // worker slot: exited threads' arenas are reused, not leaked.
  EXPECT_LE(churn.arenas, fixed.arenas + kThreads)
      << "fixed: " << fixed.arenas << " arenas, churn: " << churn.arenas << " arenas after "
      << churn.threads_started << " worker threads";
  EXPECT_GE(churn.arenas, fixed.arenas - 3);  // gRPC's own threads vary a little
  RecordProperty("arenas_fixed", fixed.arenas);
  RecordProperty("arenas_churn", churn.arenas);
}

TEST(ChurnTest, ArenaCountStaysBoundedUnderArenaMax2) {
  Outcome churn = RunServer("churn", "2");
  EXPECT_EQ(churn.allocator_env, "2");
  EXPECT_GE(churn.threads_started, static_cast<uint64_t>(kRequests / kChurnEvery));
  // Two arenas in all: the main one (the brk heap) and one thread arena
  // (which may span a second heap mapping if it outgrew the first).
  EXPECT_LE(churn.arenas, 2) << "after " << churn.threads_started << " worker threads";
  EXPECT_GE(churn.arenas, 1);
}

}  // namespace
}  // namespace rsslab
