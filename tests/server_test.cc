// Integration tests of rsslab_server: the real binary on ephemeral loopback
// ports, driven over gRPC, checked against procfs read from outside.

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
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

std::string ServerBinary() { return ServerProcess::Runfile("server/rsslab_server"); }
std::string CtlBinary() { return ServerProcess::Runfile("ctl/rsslab_ctl"); }
std::string TestHandler() { return ServerProcess::Runfile("tests/handlers/test_handler.py"); }

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

std::unique_ptr<ServerProcess> StartServer(std::vector<std::string> extra) {
  ServerProcess::Options o;
  o.binary = ServerBinary();
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// VmRSS of `pid` read by the test itself, in bytes.
int64_t OutsideRss(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    if (absl::StartsWith(line, "VmRSS:")) {
      std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t kb = 0;
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kb)) return kb * 1024;
    }
  }
  return -1;
}

using rsslab::testing::Clients;

// The seed 000 experiment at one scale: fill, shrink, idle, trim.
TEST(ServerTest, SeedPhasesFillShrinkIdleTrim) {
  auto server = StartServer({"--threads=2"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::Snapshot start = c.Snapshot(true);
  EXPECT_EQ(start.phase(), "start");
  EXPECT_EQ(start.allocator(), "glibc");

  rsslab::v1::SetPhaseResponse fill;
  ASSERT_TRUE(c.SetPhase("fill", &fill).ok());
  EXPECT_EQ(fill.snapshot().cache().cache_limit_bytes(), 100 * kMiB);
  ASSERT_EQ(c.Drive(40000, 8, 1), 0);
  rsslab::v1::Snapshot after_fill = c.Snapshot(true);
  EXPECT_EQ(after_fill.requests_in_phase(), 40000u);
  EXPECT_GT(after_fill.cache().cache_bytes(), 90 * kMiB) << "cache did not fill";
  EXPECT_GT(after_fill.cache().evictions(), 0u) << "cache did not churn";
  EXPECT_GE(after_fill.status().rss_bytes() - start.status().rss_bytes(), 60 * kMiB)
      << "RSS rose only " << (after_fill.status().rss_bytes() - start.status().rss_bytes());
  // The snapshot's RSS agrees with /proc read from outside within 2 %.
  int64_t outside = OutsideRss(server->pid());
  rsslab::v1::Snapshot now = c.Snapshot(false);
  EXPECT_NEAR(now.status().rss_bytes(), outside, 0.02 * outside);

  rsslab::v1::SetPhaseResponse shrink;
  ASSERT_TRUE(c.SetPhase("shrink", &shrink).ok());
  EXPECT_LE(shrink.snapshot().cache().cache_bytes(), 10 * kMiB);
  EXPECT_EQ(shrink.snapshot().cache().cache_limit_bytes(), 10 * kMiB);
  ASSERT_EQ(c.Drive(20000, 8, 1000000), 0);
  rsslab::v1::Snapshot after_shrink = c.Snapshot(true);
  EXPECT_LE(after_shrink.cache().cache_bytes(), 10 * kMiB);

  rsslab::v1::SetPhaseResponse idle;
  ASSERT_TRUE(c.SetPhase("idle", &idle).ok());
  rsslab::v1::HandleRequest req;
  rsslab::v1::HandleResponse resp;
  grpc::Status refused = c.Handle(req, &resp);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(refused.error_message(), "idle")) << refused.error_message();
  EXPECT_EQ(c.Snapshot().requests_refused(), 1u);

  rsslab::v1::SetPhaseResponse trim;
  ASSERT_TRUE(c.SetPhase("trim", &trim).ok());
  EXPECT_EQ(trim.trim().call(), "malloc_trim(0)");
  EXPECT_GT(trim.trim().trim_duration_us(), 0);
  int64_t before = trim.before().status().rss_bytes();
  int64_t after = trim.snapshot().status().rss_bytes();
  EXPECT_LT(after, before * 0.6) << "trim: " << before << " -> " << after;
  EXPECT_EQ(trim.snapshot().trims_total(), 1u);
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

TEST(ServerTest, SnapshotReportsThreadsArenasAndEnvironment) {
  ServerProcess::Options o;
  o.binary = ServerBinary();
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0", "--threads=6"};
  o.env = {{"MALLOC_ARENA_MAX", "3"}};
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  Clients c(s->get());
  ASSERT_EQ(c.Drive(3000, 6, 7), 0);
  rsslab::v1::Snapshot snap = c.Snapshot(true);
  int workers = 0;
  for (const auto& t : snap.thread_names()) {
    if (absl::StartsWith(t.comm(), "rsslab-w")) workers += t.count();
  }
  EXPECT_EQ(workers, 6);
  EXPECT_EQ(snap.workers().configured(), 6);
  EXPECT_EQ(snap.workers().alive(), 6);
  EXPECT_GE(snap.status().threads(), 7);
  EXPECT_EQ(snap.allocator_env().at("MALLOC_ARENA_MAX"), "3");
  // Workers malloc in parallel with the GIL dropped rarely, but each thread
  // that allocated got an arena up to the cap of 3 (main + 2 thread arenas).
  EXPECT_LE(snap.memory_map().arena_count(), 2);
  EXPECT_GE(snap.allocator_stats().glibc().malloc_info_arenas(), 1);
  EXPECT_LE(snap.allocator_stats().glibc().malloc_info_arenas(), 3);
  EXPECT_GT(snap.python().allocated_blocks(), 0);
  EXPECT_TRUE(absl::StartsWith(snap.python().version(), "3."));
  EXPECT_GT(snap.memory_map().file_rss_bytes(), 0);
  EXPECT_GT(snap.snapshot_duration_us(), 0);
}

// The io thread runs SCHED_BATCH (server/load_service.cc says why); the
// workers stay SCHED_OTHER, so the handler is scheduled as a Python
// service's threads are. Policy is field 41 of /proc/PID/task/TID/stat.
TEST(ServerTest, IoThreadIsBatchWorkersAreNot) {
  auto s = StartServer({"--threads=2"});
  ASSERT_NE(s, nullptr);
  Clients c(s.get());
  ASSERT_EQ(c.Drive(200, 2, 4), 0);
  const std::string task_dir = absl::StrCat("/proc/", s->pid(), "/task");
  std::map<std::string, std::vector<int>> policies;  // comm -> policies
  for (const auto& tid : ListDir(task_dir)) {
    std::ifstream comm_in(absl::StrCat(task_dir, "/", tid, "/comm"));
    std::string comm;
    std::getline(comm_in, comm);
    std::ifstream stat_in(absl::StrCat(task_dir, "/", tid, "/stat"));
    std::string stat((std::istreambuf_iterator<char>(stat_in)), std::istreambuf_iterator<char>());
    // Fields after the parenthesized comm, which may hold spaces.
    std::vector<std::string> f = absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ');
    ASSERT_GT(f.size(), 38u) << stat;
    int policy = -1;
    ASSERT_TRUE(absl::SimpleAtoi(f[38], &policy)) << stat;  // field 41
    policies[comm].push_back(policy);
  }
  ASSERT_EQ(policies["rsslab-io"].size(), 1u);
  EXPECT_EQ(policies["rsslab-io"][0], SCHED_BATCH);
  ASSERT_EQ(policies["rsslab-w0"].size(), 1u);
  EXPECT_EQ(policies["rsslab-w0"][0], SCHED_OTHER);
  EXPECT_EQ(policies["rsslab-w1"].at(0), SCHED_OTHER);
}

TEST(ServerTest, HandlerExceptionIsInternalAndServerKeepsServing) {
  auto server = StartServer({"--threads=2", "--handler=" + TestHandler()});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::HandleRequest bad;
  (*bad.mutable_params())["raise"] = "1";
  rsslab::v1::HandleResponse resp;
  for (int i = 0; i < 3; ++i) {
    grpc::Status s = c.Handle(bad, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
    EXPECT_TRUE(absl::StrContains(s.error_message(), "ValueError")) << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), "boom")) << s.error_message();
  }
  rsslab::v1::HandleRequest good;
  (*good.mutable_params())["print"] = "1";
  ASSERT_TRUE(c.Handle(good, &resp).ok());
  EXPECT_EQ(resp.result().at("worker_seen"), std::to_string(resp.worker()));
  rsslab::v1::Snapshot snap = c.Snapshot();
  EXPECT_EQ(snap.handler_errors(), 3u);
  EXPECT_EQ(snap.requests_served(), 4u);
  EXPECT_EQ(server->Stop(SIGTERM), 0);
}

TEST(ServerTest, CachePutEvictsByBytes) {
  auto server = StartServer({"--threads=1", "--handler=" + TestHandler(), "--cache_limit_mb=1"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  for (int i = 0; i < 10; ++i) {
    rsslab::v1::HandleRequest req;
    req.set_seed(i);
    (*req.mutable_params())["store"] = std::to_string(200 * 1024);
    rsslab::v1::HandleResponse resp;
    ASSERT_TRUE(c.Handle(req, &resp).ok());
    EXPECT_TRUE(resp.stored());
    EXPECT_EQ(resp.body_size(), 200 * 1024);
    EXPECT_TRUE(resp.body().empty()) << "body sent without return_body";
  }
  rsslab::v1::Snapshot snap = c.Snapshot();
  EXPECT_LE(snap.cache().cache_bytes(), kMiB);
  EXPECT_EQ(snap.cache().cache_entries(), 5);  // 5 x (200 KiB + key) fit in 1 MiB
  EXPECT_EQ(snap.cache().evictions(), 5u);
  EXPECT_EQ(snap.cache().puts(), 10u);
}

// The product has one dispatcher, the Python handler's: snapshots say so,
// and --dispatch (the benchmark server's knob, bench/dispatch/) is a flag
// rsslab_server does not have. The benchmark modes are tested beside that
// binary (//bench/dispatch:bench_server_test).
TEST(ServerTest, TheProductRunsEveryCallThroughThePythonHandler) {
  auto server = StartServer({"--threads=2", "--handler=" + TestHandler()});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::HandleResponse resp;
  grpc::Status st = c.Handle(7, {{"store", "1000"}}, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(resp.stored());
  rsslab::v1::Snapshot snap = c.Snapshot();
  EXPECT_EQ(snap.config().dispatch(), "python");
  EXPECT_EQ(snap.cache().puts(), 1u);
  EXPECT_EQ(server->Stop(SIGTERM), 0);
  auto r = ServerProcess::Run(ServerBinary(), {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                                               "--dispatch=pool"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "dispatch")) << r.err;
}

// The bound rsslab.auto_trim(settle_fraction=) applies too (one table,
// common/auto_trim_table.h), the flag named.
TEST(ServerTest, AutoTrimRangesAreTheTablesNamingTheFlag) {
  auto r = ServerProcess::Run(ServerBinary(), {"--listen=127.0.0.1:0",
                                               "--control_listen=127.0.0.1:0",
                                               "--auto_trim_settle_fraction=0.995"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(
      r.err, "--auto_trim_settle_fraction must be between 0 and 0.99; got 0.995"))
      << r.err;
  r = ServerProcess::Run(ServerBinary(), {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                                          "--auto_trim=sometimes"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(
      r.err, "--auto_trim must be off, after_burst or interval; got 'sometimes'"))
      << r.err;
}

TEST(ServerTest, BadPhaseArgumentsAreInvalidArgument) {
  auto server = StartServer({"--threads=1"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::SetPhaseResponse resp;
  grpc::Status s = c.SetPhase("explode", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "unknown phase 'explode'")) << s.error_message();
  EXPECT_TRUE(absl::StrContains(s.error_message(), "fill, shrink, idle, trim")) << s.error_message();
  s = c.SetPhase("fill", &resp, -5);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "between 0 and")) << s.error_message();
  s = c.SetPhase("fill", &resp, int64_t{1} << 60);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The package's serve() refuses it the same way (control/service/request_check.h).
  EXPECT_TRUE(absl::StrContains(s.error_message(), "(the ceiling is MemTotal)"))
      << s.error_message();
  // Nothing changed.
  EXPECT_EQ(c.Snapshot().phase(), "start");
  EXPECT_EQ(c.Snapshot().cache().cache_limit_bytes(), 100 * kMiB);
  // Watch interval validation.
  rsslab::v1::WatchRequest wr;
  wr.set_interval_ms(-1);
  grpc::ClientContext ctx;
  auto reader = c.control->WatchSnapshots(&ctx, wr);
  rsslab::v1::Snapshot snap;
  EXPECT_FALSE(reader->Read(&snap));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(ServerTest, WatchStreamsSnapshots) {
  auto server = StartServer({"--threads=1"});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::WatchRequest wr;
  wr.set_interval_ms(20);
  wr.set_max_count(5);
  grpc::ClientContext ctx;
  auto reader = c.control->WatchSnapshots(&ctx, wr);
  rsslab::v1::Snapshot snap;
  int n = 0;
  int64_t last = 0;
  while (reader->Read(&snap)) {
    EXPECT_GT(snap.unix_nanos(), last);
    last = snap.unix_nanos();
    EXPECT_GT(snap.status().rss_bytes(), 0);
    ++n;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(n, 5);
}

TEST(ServerTest, MissingHandlerExitsBeforeReady) {
  auto r = ServerProcess::Run(ServerBinary(), {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                                               "--handler=/nonexistent/h.py"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(absl::StrContains(r.out, "ready"));
  EXPECT_TRUE(absl::StrContains(r.err, "/nonexistent/h.py")) << r.err;
}

TEST(ServerTest, HandlerImportErrorShowsTraceback) {
  std::string h = ServerProcess::Runfile("tests/handlers/import_error.py");
  auto r = ServerProcess::Run(ServerBinary(),
                              {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0", "--handler=" + h});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_FALSE(absl::StrContains(r.out, "ready"));
  EXPECT_TRUE(absl::StrContains(r.err, "import_error.py")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "Traceback")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "ModuleNotFoundError")) << r.err;
}

TEST(ServerTest, PortInUseIsOneLineError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string addr = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  auto r = ServerProcess::Run(ServerBinary(), {"--listen=" + addr, "--control_listen=127.0.0.1:0"});
  close(fd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(r.err, "cannot listen on " + addr)) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--listen")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(ServerTest, SigtermFinishesInFlightCallsAndExitsZero) {
  auto server = StartServer({"--threads=1", "--handler=" + TestHandler()});
  ASSERT_NE(server, nullptr);
  Clients c(server.get());
  rsslab::v1::HandleRequest slow;
  (*slow.mutable_params())["sleep_ms"] = "1500";
  grpc::Status status;
  std::atomic<bool> started{false};
  std::thread t([&] {
    rsslab::v1::HandleResponse resp;
    started = true;
    status = c.Handle(slow, &resp);
  });
  // Wait until the worker is busy with it (readiness, not a guess).
  for (int i = 0; i < 1000 && c.Snapshot().workers().busy() == 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(c.Snapshot().workers().busy(), 1);
  kill(server->pid(), SIGTERM);
  t.join();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(server->Wait(absl::Seconds(30)), 0) << server->Stderr();
}

TEST(ServerTest, CtlSnapshotJsonHasTheDocumentedFields) {
  auto server = StartServer({"--threads=2"});
  ASSERT_NE(server, nullptr);
  std::string ctl = CtlBinary();
  auto phase = ServerProcess::Run(ctl, {"--control=" + server->control_address(), "--json", "phase", "trim"});
  ASSERT_EQ(phase.exit_code, 0) << phase.err;
  EXPECT_TRUE(absl::StrContains(phase.out, "\"trim_duration_us\"")) << phase.out;
  auto snap = ServerProcess::Run(ctl, {"--control=" + server->control_address(), "snapshot", "--json"});
  ASSERT_EQ(snap.exit_code, 0) << snap.err;
  EXPECT_EQ(std::count(snap.out.begin(), snap.out.end(), '\n'), 1);
  for (const char* f : {"rss_bytes", "hwm_bytes", "anon_bytes", "threads", "arena_count", "allocator",
                        "phase", "cache_bytes", "cache_limit_bytes", "requests_served"}) {
    EXPECT_TRUE(absl::StrContains(snap.out, absl::StrCat("\"", f, "\":"))) << f;
  }
  EXPECT_TRUE(absl::StrContains(snap.out, "\"phase\":\"trim\"")) << snap.out;
  auto text = ServerProcess::Run(ctl, {"--control=" + server->control_address(), "snapshot"});
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(text.out, "rss ")) << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "MiB")) << text.out;
  auto bad = ServerProcess::Run(ctl, {"--control=" + server->control_address(), "phase", "nope"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(bad.err, "INVALID_ARGUMENT")) << bad.err;
  auto watch = ServerProcess::Run(ctl, {"--control=" + server->control_address(), "watch",
                                        "--interval=50ms", "--count=3", "--json"});
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_EQ(std::count(watch.out.begin(), watch.out.end(), '\n'), 3);
  server->Stop();
  auto down = ServerProcess::Run(ctl, {"--control=" + server->control_address(), "--timeout=2s", "snapshot"});
  EXPECT_NE(down.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(down.err, server->control_address())) << down.err;
}

}  // namespace
}  // namespace rsslab
