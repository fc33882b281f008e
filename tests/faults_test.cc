// Faults a long soak meets, against the real server: a handler that hangs,
// clients that cancel or vanish mid-call, many short-lived connections.

#include <signal.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/server_process.h"
#include "tests/thread_census.h"

namespace rsslab {
namespace {

using ::rsslab::testing::GrpcThreads;
using ::rsslab::testing::NonGrpcThreads;

using ::rsslab::testing::ServerProcess;

std::unique_ptr<ServerProcess> Start(std::vector<std::string> extra) {
  auto s = ServerProcess::Start(ServerProcess::TestServer(std::move(extra)));
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

rsslab::v1::Snapshot Snap(ServerProcess* s) {
  auto stub = rsslab::v1::Control::NewStub(
      grpc::CreateChannel(s->control_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  rsslab::v1::Snapshot snap;
  EXPECT_TRUE(stub->GetSnapshot(&ctx, rsslab::v1::SnapshotRequest(), &snap).ok());
  return snap;
}

// Polls `pred` on fresh snapshots until true or `timeout`: waiting for a
// state, never for a fixed time.
bool WaitFor(ServerProcess* s, absl::Duration timeout,
             const std::function<bool(const rsslab::v1::Snapshot&)>& pred) {
  absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (pred(Snap(s))) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pred(Snap(s));
}

grpc::Status Call(rsslab::v1::Load::Stub* stub, const std::string& sleep_ms,
                  absl::Duration deadline) {
  rsslab::v1::HandleRequest req;
  if (!sleep_ms.empty()) (*req.mutable_params())["sleep_ms"] = sleep_ms;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  rsslab::v1::HandleResponse resp;
  return stub->Handle(&ctx, req, &resp);
}

TEST(FaultsTest, HangingHandlerIsDeadlineExceededReportedStuckAndOthersServe) {
  auto server = Start({"--threads=2", "--stuck_after_ms=200"});
  ASSERT_NE(server, nullptr);
  auto stub = rsslab::v1::Load::NewStub(
      grpc::CreateChannel(server->data_address(), grpc::InsecureChannelCredentials()));
  // "Hangs" for 4 s, far past the client's 300 ms deadline.
  grpc::Status hung = Call(stub.get(), "4000", absl::Milliseconds(300));
  EXPECT_EQ(hung.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitFor(server.get(), absl::Seconds(10),
                      [](const rsslab::v1::Snapshot& s) { return s.workers().stuck() == 1; }))
      << Snap(server.get()).workers().DebugString();
  rsslab::v1::Snapshot snap = Snap(server.get());
  ASSERT_EQ(snap.workers().workers_size(), 1);  // busy workers are listed
  EXPECT_GE(snap.workers().workers(0).busy_for_us(), 200000);
  // The other worker keeps serving meanwhile.
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Call(stub.get(), "", absl::Seconds(10)).ok()) << i;
  }
  EXPECT_EQ(Snap(server.get()).workers().stuck(), 1);
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

TEST(FaultsTest, CancelledAndVanishingClientsLeakNoThreads) {
  auto server = Start({"--threads=4"});
  ASSERT_NE(server, nullptr);
  {
    // Warm up: gRPC starts its pollers on the first connections.
    auto stub = rsslab::v1::Load::NewStub(
        grpc::CreateChannel(server->data_address(), grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(Call(stub.get(), "", absl::Seconds(10)).ok());
  }
  // Our threads (workers, Python's) must come back exactly; gRPC's own
  // executor pools grow under 200 connections and shrink on their own
  // schedule, so they get two threads of slack.
  const rsslab::v1::Snapshot base = Snap(server.get());
  const int baseline = NonGrpcThreads(base);
  const int baseline_grpc = GrpcThreads(base);
  const int64_t baseline_rss = Snap(server.get()).status().rss_bytes();

  // 200 clients, each on its own connection: half cancel mid-call, half
  // just go away with a call in flight.
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        grpc::ChannelArguments args;
        args.SetInt("rsslab.client", t * 100 + i);  // distinct channel = own connection
        auto ch = grpc::CreateCustomChannel(server->data_address(),
                                            grpc::InsecureChannelCredentials(), args);
        auto stub = rsslab::v1::Load::NewStub(ch);
        rsslab::v1::HandleRequest req;
        (*req.mutable_params())["sleep_ms"] = "50";
        grpc::ClientContext ctx;
        rsslab::v1::HandleResponse resp;
        grpc::CompletionQueue cq;
        auto rpc = stub->AsyncHandle(&ctx, req, &cq);
        grpc::Status st;
        rpc->Finish(&resp, &st, reinterpret_cast<void*>(1));
        if (i % 2 == 0) ctx.TryCancel();
        void* tag;
        bool ok;
        if (i % 2 == 0) cq.Next(&tag, &ok);  // cancelled: wait for it
        // else: channel, stub and context are destroyed with the call in flight
        ctx.TryCancel();
        cq.Shutdown();
        while (cq.Next(&tag, &ok)) {
        }
      }
    });
  }
  for (auto& c : clients) c.join();

  // Every worker gets free again and the thread count returns to baseline.
  EXPECT_TRUE(WaitFor(server.get(), absl::Seconds(30), [&](const rsslab::v1::Snapshot& s) {
    return s.workers().busy() == 0 && s.workers().queue_depth() == 0 &&
           NonGrpcThreads(s) <= baseline && GrpcThreads(s) <= baseline_grpc + 2;
  })) << "threads (not gRPC's) " << NonGrpcThreads(Snap(server.get())) << " vs baseline "
      << baseline << "; gRPC's " << GrpcThreads(Snap(server.get())) << " vs " << baseline_grpc;
  rsslab::v1::Snapshot after = Snap(server.get());
  EXPECT_EQ(after.workers().alive(), 4);
  // No runaway memory from 200 dropped connections (generous bound: the
  // handler allocates nothing that survives).
  EXPECT_LT(after.status().rss_bytes() - baseline_rss, 32 << 20);
  // Still serving.
  auto stub = rsslab::v1::Load::NewStub(
      grpc::CreateChannel(server->data_address(), grpc::InsecureChannelCredentials()));
  EXPECT_TRUE(Call(stub.get(), "", absl::Seconds(10)).ok());
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

}  // namespace
}  // namespace rsslab
