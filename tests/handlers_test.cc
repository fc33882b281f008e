// Integration tests of the shipped handlers (server/handlers/*.py): each one
// runs in a real rsslab_server on ephemeral loopback ports and shows its
// signature effect in the server's own snapshots. No sleeps: every wait is
// for a condition (a response, or a snapshot showing something).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/clients.h"
#include "tests/server_process.h"
#include "tests/thread_census.h"

namespace rsslab {
namespace {

using ::rsslab::testing::NonGrpcThreads;

using ::rsslab::testing::ServerProcess;
constexpr int64_t kMiB = 1 << 20;

std::unique_ptr<ServerProcess> StartServer(const std::string& handler, int threads,
                                           std::map<std::string, std::string> env = {},
                                           const std::string& handler_params = "") {
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
            absl::StrCat("--threads=", threads),
            "--handler=" + ServerProcess::Runfile("server/handlers/" + handler)};
  if (!handler_params.empty()) o.args.push_back("--handler_params=" + handler_params);
  o.env = std::move(env);
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

using rsslab::testing::Clients;

int64_t ResultInt(const rsslab::v1::HandleResponse& r, const std::string& key) {
  int64_t v = -1;
  auto it = r.result().find(key);
  if (it == r.result().end() || !absl::SimpleAtoi(it->second, &v)) return -1;
  return v;
}

int Census(const rsslab::v1::Snapshot& s, const std::string& comm) {
  for (const auto& t : s.thread_names()) {
    if (t.comm() == comm) return t.count();
  }
  return 0;
}

TEST(HandlersTest, NoopAnswers) {
  auto server = StartServer("noop.py", 2);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  for (int i = 0; i < 50; ++i) {
    rsslab::v1::HandleResponse resp;
    ASSERT_TRUE(c.Handle(i, {}, &resp).ok());
    EXPECT_EQ(resp.id(), static_cast<uint64_t>(i));
    EXPECT_EQ(resp.body_size(), 0);
    EXPECT_FALSE(resp.stored());
  }
  rsslab::v1::Snapshot s = c.Snapshot();
  EXPECT_EQ(s.requests_served(), 50u);
  EXPECT_EQ(s.handler_errors(), 0u);
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

// One request makes a single long libz call (64 MiB, GIL released); another
// client keeps sending small requests. At least one small request runs from
// start to end on the other worker while the long call is in progress:
// impossible if that call held the GIL.
TEST(HandlersTest, CBuffersRunsOnTwoWorkersConcurrently) {
  auto server = StartServer("c_buffers.py", 2);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::HandleResponse big;
  std::atomic<bool> big_done{false};
  grpc::Status big_status;
  std::thread t([&] {
    big_status = c.Handle(1, {{"events", "1"}, {"min_kb", "65536"}, {"max_kb", "65536"}}, &big);
    big_done = true;
  });
  std::vector<rsslab::v1::HandleResponse> small;
  uint64_t seed = 100;
  while (!big_done) {
    rsslab::v1::HandleResponse r;
    ASSERT_TRUE(c.Handle(seed++, {{"events", "2"}, {"min_kb", "1"}, {"max_kb", "4"}}, &r).ok());
    small.push_back(r);
  }
  t.join();
  ASSERT_TRUE(big_status.ok()) << big_status.error_message();
  int64_t c0 = ResultInt(big, "longest_c_t0_us"), c1 = ResultInt(big, "longest_c_t1_us");
  ASSERT_GT(c1, c0);
  int inside = 0;
  for (const auto& r : small) {
    if (r.worker() != big.worker() && ResultInt(r, "t0_us") > c0 && ResultInt(r, "t1_us") < c1) {
      ++inside;
    }
  }
  EXPECT_GE(inside, 1) << "no request ran entirely inside the " << (c1 - c0)
                       << " us libz call on worker " << big.worker() << " (" << small.size()
                       << " small requests sent)";
  std::cout << "c_buffers: " << inside << " of " << small.size()
            << " requests ran entirely inside one " << (c1 - c0) / 1000 << " ms libz call\n";
  EXPECT_EQ(c.Snapshot().handler_errors(), 0u);
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

// Seed 002 part 1. MALLOC_ARENA_MAX=64 lifts glibc's 8 x cores arena cap,
// which gRPC's own threads already reach on a 2-core machine.
TEST(HandlersTest, AsyncioExecutorsLeakThreadsAndArenasWithoutFixNotWithFix) {
  constexpr int kRounds = 3, kPerRound = 3, kFire = 2;
  std::vector<int> leak_threads, leak_arenas, fixed_threads, fixed_arenas;
  int leak_cleanup = 0, fixed_cleanup = -1;
  for (const char* fix : {"0", "1"}) {
    auto server = StartServer("asyncio_executors.py", 2, {{"MALLOC_ARENA_MAX", "64"}});
    ASSERT_NE(server, nullptr);
    Clients c(server.get());
    bool leaky = std::string(fix) == "0";
    auto& threads = leaky ? leak_threads : fixed_threads;
    auto& arenas = leaky ? leak_arenas : fixed_arenas;
    rsslab::v1::Snapshot s = c.Snapshot();
    threads.push_back(NonGrpcThreads(s));
    arenas.push_back(s.memory_map().arena_count());
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kPerRound; ++i) {
        rsslab::v1::HandleResponse r;
        // Without the fix the cleanups outlive the test (60 s); with it they
        // are awaited, so keep them short.
        grpc::Status st = c.Handle(round * 10 + i,
                                   {{"fix", fix},
                                    {"fire", absl::StrCat(kFire)},
                                    {"linger_ms", leaky ? "60000" : "50"}},
                                   &r);
        ASSERT_TRUE(st.ok()) << st.error_message();
      }
      s = c.Snapshot();
      // With the fix, asyncio's executor shutdown runs in a helper thread
      // that ends just after the request's answer (3.11's
      // shutdown_default_executor): wait (bounded) for such stragglers to
      // go, so only threads that stay count.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!leaky && NonGrpcThreads(s) > threads[0] + 1 &&
             std::chrono::steady_clock::now() < deadline) {
        s = c.Snapshot();
      }
      threads.push_back(NonGrpcThreads(s));
      arenas.push_back(s.memory_map().arena_count());
      (leaky ? leak_cleanup : fixed_cleanup) = Census(s, "aio-cleanup");
    }
    EXPECT_EQ(s.handler_errors(), 0u);
    // The leaking server still has live cleanup threads: no clean stop
    // expected; the destructor kills it.
    if (!leaky) {
      EXPECT_EQ(server->Stop(), 0) << server->Stderr();
    }
  }
  auto str = [](const std::vector<int>& v) {
    std::string out;
    for (int x : v) absl::StrAppend(&out, out.empty() ? "" : " -> ", x);
    return out;
  };
  std::cout << "asyncio_executors fix=0: threads (not gRPC's) " << str(leak_threads) << ", arenas "
            << str(leak_arenas) << "\nasyncio_executors fix=1: threads (not gRPC's) "
            << str(fixed_threads) << ", arenas " << str(fixed_arenas) << "\n";
  // Without the fix: every round adds its fired cleanup threads, and arenas.
  // (A round's cleanup threads may start after its snapshot and count in
  // the next round's, so each round must grow and the total must add up.)
  for (int i = 1; i <= kRounds; ++i) {
    EXPECT_GT(leak_threads[i], leak_threads[i - 1]) << str(leak_threads);
  }
  EXPECT_GE(leak_threads[kRounds] - leak_threads[0], kFire * kPerRound * kRounds - 1)
      << str(leak_threads);
  EXPECT_EQ(leak_cleanup, kFire * kPerRound * kRounds);
  EXPECT_GE(leak_arenas[kRounds] - leak_arenas[1], kFire * kPerRound) << str(leak_arenas);
  // With it: flat after the first round. Threads are counted without
  // gRPC's own pools, which grow and shrink with load on their own.
  EXPECT_EQ(fixed_cleanup, 0);
  for (int i = 2; i <= kRounds; ++i) {
    EXPECT_LE(std::abs(fixed_threads[i] - fixed_threads[1]), 1) << str(fixed_threads);
    EXPECT_LE(fixed_arenas[i] - fixed_arenas[1], 1) << str(fixed_arenas);
  }
}

// Sends one large_buffers request with `params` and polls snapshots while it
// runs; returns the largest glibc hblkhd seen while a worker was busy.
int64_t PeakMmappedDuring(Clients& c, uint64_t seed, std::map<std::string, std::string> params,
                          int* busy_snapshots) {
  std::atomic<bool> done{false};
  grpc::Status st;
  std::thread t([&] {
    rsslab::v1::HandleResponse r;
    st = c.Handle(seed, params, &r);
    done = true;
  });
  int64_t peak = 0;
  *busy_snapshots = 0;
  while (!done) {
    rsslab::v1::Snapshot s = c.Snapshot();
    if (s.workers().busy() > 0) {
      ++*busy_snapshots;
      peak = std::max(peak, s.allocator_stats().glibc().hblkhd());
    }
  }
  t.join();
  EXPECT_TRUE(st.ok()) << st.error_message();
  return peak;
}

// Seed 002 part 2: mmapped big buffers go back to the OS, arena memory stays;
// and glibc's dynamic mmap threshold.
TEST(HandlersTest, LargeBuffersMmapRisesDuringFallsAfterArenaStays) {
  auto server = StartServer("large_buffers.py", 2);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::Snapshot start = c.Snapshot();
  int busy = 0;
  // 2 x 40 MiB: above the 32 MiB ceiling of the dynamic threshold, always mmapped.
  int64_t peak = PeakMmappedDuring(c, 1, {{"big_mb", "40"}, {"hold_ms", "800"}}, &busy);
  ASSERT_GT(busy, 0);
  rsslab::v1::Snapshot after = c.Snapshot();
  const auto& g0 = start.allocator_stats().glibc();
  const auto& g1 = after.allocator_stats().glibc();
  std::cout << "large_buffers 40 MiB: hblkhd " << g0.hblkhd() / kMiB << " -> " << peak / kMiB
            << " during -> " << g1.hblkhd() / kMiB << " MiB after; glibc arena " << g0.arena() / kMiB
            << " -> " << g1.arena() / kMiB << " MiB; arena RSS "
            << start.memory_map().arena_rss_bytes() / kMiB << " -> "
            << after.memory_map().arena_rss_bytes() / kMiB << " MiB\n";
  EXPECT_GE(peak - g0.hblkhd(), 80 * kMiB);
  EXPECT_LT(g1.hblkhd() - g0.hblkhd(), 4 * kMiB);
  // 2000 small buffers of 600..4096 bytes (~4.5 MiB) were freed (a few cached):
  // the arenas keep that memory.
  EXPECT_GE(g1.arena() - g0.arena(), 3 * kMiB);
  EXPECT_GE(after.memory_map().arena_rss_bytes() + after.memory_map().heap_rss_bytes() -
                start.memory_map().arena_rss_bytes() - start.memory_map().heap_rss_bytes(),
            3 * kMiB);

  // glibc's dynamic mmap threshold: freeing the 40 MiB chunks did not move
  // it (over its 32 MiB ceiling), so the first 4 MiB request is mmapped; its
  // free raises the threshold to 4 MiB, and the next one comes from the arena.
  int64_t first4 = PeakMmappedDuring(c, 2, {{"big_mb", "4"}, {"hold_ms", "800"}}, &busy);
  ASSERT_GT(busy, 0);
  rsslab::v1::Snapshot mid4 = c.Snapshot();
  int64_t second4 = PeakMmappedDuring(c, 3, {{"big_mb", "4"}, {"hold_ms", "800"}}, &busy);
  ASSERT_GT(busy, 0);
  rsslab::v1::Snapshot after4 = c.Snapshot();
  std::cout << "large_buffers 4 MiB: hblkhd during 1st " << first4 / kMiB << " MiB, 2nd "
            << second4 / kMiB << " MiB; glibc arena " << mid4.allocator_stats().glibc().arena() / kMiB
            << " -> " << after4.allocator_stats().glibc().arena() / kMiB << " MiB\n";
  EXPECT_GE(first4 - g0.hblkhd(), 8 * kMiB);
  EXPECT_LT(second4 - g0.hblkhd(), 4 * kMiB) << "dynamic mmap threshold did not rise";
  EXPECT_GE(after4.allocator_stats().glibc().arena() - mid4.allocator_stats().glibc().arena(),
            4 * kMiB);
  EXPECT_EQ(after4.handler_errors(), 0u);
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

// web_worker's json document of one request, parsed (return_doc=1 echoes it).
google::protobuf::Struct Doc(const rsslab::v1::HandleResponse& r) {
  google::protobuf::Struct doc;
  auto it = r.result().find("doc");
  EXPECT_NE(it, r.result().end()) << "no result[\"doc\"]";
  if (it != r.result().end()) {
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(it->second, &doc).ok()) << it->second;
  }
  return doc;
}

// The default shape is seed 000's flat dict of scalars; dict_shape=nested is
// the handler's shape before flat became the default (and draws the same random
// stream: the same bodies are stored as that handler stored); an unknown
// shape fails the call naming the knob; snapshots say which shape a server
// ran by default.
TEST(HandlersTest, WebWorkerDictShapes) {
  auto server = StartServer("web_worker.py", 1);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::HandleResponse flat;
  ASSERT_TRUE(c.Handle(1, {{"return_doc", "1"}}, &flat).ok());
  google::protobuf::Struct doc = Doc(flat);
  ASSERT_EQ(doc.fields_size(), 200);
  for (int i = 0; i < 200; ++i) {
    auto it = doc.fields().find(absl::StrCat("k", i));
    ASSERT_NE(it, doc.fields().end()) << "k" << i;
    if (i % 2 == 0) {
      EXPECT_EQ(it->second.number_value(), i) << "k" << i;
    } else {
      EXPECT_EQ(it->second.string_value(), absl::StrCat("v", i)) << "k" << i;
    }
  }
  rsslab::v1::HandleResponse small;
  ASSERT_TRUE(c.Handle(2, {{"return_doc", "1"}, {"dict_items", "7"}}, &small).ok());
  EXPECT_EQ(Doc(small).fields_size(), 7);

  rsslab::v1::HandleResponse nested;
  ASSERT_TRUE(c.Handle(1, {{"return_doc", "1"}, {"dict_shape", "nested"}}, &nested).ok());
  doc = Doc(nested);
  ASSERT_EQ(doc.fields_size(), 200);
  for (int i = 0; i < 200; ++i) {
    const google::protobuf::Value& v = doc.fields().at(absl::StrCat("k", i));
    ASSERT_EQ(v.list_value().values_size(), 3) << "k" << i;
    EXPECT_EQ(v.list_value().values(0).number_value(), i);
    double x = v.list_value().values(1).number_value();
    EXPECT_TRUE(x >= 0 && x < 1 && x != static_cast<int>(x)) << x;
    EXPECT_EQ(v.list_value().values(2).string_value(), absl::StrCat("v", i));
  }
  // Body sizes and store decisions of seeds 1..12 under the handler before
  // flat became the default (nested dict, the same draws in the same order).
  const std::vector<std::pair<int64_t, bool>> before = {
      {10187, false}, {107754, false}, {932, true},  {1920, false}, {13940, true}, {3887, false},
      {2401, true},   {157, false},    {3518, true}, {5650, false}, {3100, false}, {3383, true}};
  int stored_differs = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    rsslab::v1::HandleResponse n, f;
    ASSERT_TRUE(c.Handle(i + 1, {{"dict_shape", "nested"}}, &n).ok());
    EXPECT_EQ(n.body_size(), before[i].first) << "seed " << i + 1;
    EXPECT_EQ(n.stored(), before[i].second) << "seed " << i + 1;
    ASSERT_TRUE(c.Handle(i + 1, {}, &f).ok());
    EXPECT_EQ(f.body_size(), before[i].first) << "seed " << i + 1;  // drawn before the dict
    if (f.stored() != before[i].second) ++stored_differs;
  }
  // The flat shape draws no floats, so its store decisions are other draws.
  EXPECT_GT(stored_differs, 0);

  rsslab::v1::HandleResponse bad;
  // Refused against the handler's KNOBS before handle() runs.
  grpc::Status st = c.Handle(3, {{"dict_shape", "deep"}}, &bad);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("dict_shape=deep is out of range: must be one of flat, nested"),
            std::string::npos)
      << st.error_message();

  rsslab::v1::Snapshot s = c.Snapshot();
  EXPECT_EQ(s.config().handler_params().at("dict_shape"), "flat");
  EXPECT_EQ(s.config().handler_params().at("dict_items"), "200");
  EXPECT_EQ(s.handler_errors(), 0u);  // refused, never handled
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();

  // --handler_params overrides the handler's DEFAULTS in what snapshots say.
  auto nested_server = StartServer("web_worker.py", 1, {}, "dict_shape=nested");
  ASSERT_NE(nested_server, nullptr);
  Clients n(nested_server.get());
  rsslab::v1::HandleResponse r;
  ASSERT_TRUE(n.Handle(1, {{"return_doc", "1"}}, &r).ok());
  EXPECT_EQ(Doc(r).fields().at("k0").list_value().values_size(), 3);
  rsslab::v1::Snapshot ns = n.Snapshot();
  EXPECT_EQ(ns.config().handler_params().at("dict_shape"), "nested");
  EXPECT_EQ(ns.config().handler_params().at("median"), "4096.0");
  EXPECT_EQ(nested_server->Stop(), 0) << nested_server->Stderr();
}

// json's C accelerator must load in the server: however CPython is linked
// (tools/bazel/system_libs.bzl), a lib-dynload module that cannot resolve
// the C API makes json fall back to pure Python, several times slower.
TEST(HandlersTest, JsonAcceleratorLoaded) {
  auto server = StartServer("noop.py", 1);
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::Snapshot s = c.Snapshot();
  std::map<std::string, rsslab::v1::PythonModule> mods;
  for (const auto& m : s.python().accelerators()) mods[m.name()] = m;
  ASSERT_EQ(mods.count("_json"), 1u);
  EXPECT_TRUE(mods["_json"].loaded()) << mods["_json"].origin();
  const std::string& origin = mods["_json"].origin();
  EXPECT_TRUE(origin == "built-in" || (origin.find("/_json.") != std::string::npos &&
                                       origin.size() > 3 &&
                                       origin.compare(origin.size() - 3, 3, ".so") == 0))
      << origin;
  for (const char* name : {"_random", "math"}) {
    EXPECT_TRUE(mods[name].loaded()) << name << ": " << mods[name].origin();
  }
  EXPECT_EQ(server->Stderr().find("accelerator"), std::string::npos) << server->Stderr();
  EXPECT_EQ(server->Stop(), 0) << server->Stderr();
}

}  // namespace
}  // namespace rsslab
