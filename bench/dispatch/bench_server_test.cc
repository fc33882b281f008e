// rsslab_bench_server, the real binary on loopback: every --dispatch mode
// answers, only "python" runs the handler (its cache.put is the witness:
// puts stays 0 when the handler is skipped), snapshots and rsslab_ctl say
// which mode ran, and a bad mode is a usage error.

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "proto/load.pb.h"
#include "proto/snapshot.pb.h"
#include "tests/clients.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Clients;
using ::rsslab::testing::ServerProcess;

std::string BenchServer() { return ServerProcess::Runfile("bench/dispatch/rsslab_bench_server"); }

TEST(BenchServerTest, DispatchSkipsPythonOnlyInBenchmarkModes) {
  for (const std::string mode : {"python", "pool", "inline"}) {
    SCOPED_TRACE(mode);
    ServerProcess::Options o = ServerProcess::TestServer({"--threads=2", "--dispatch=" + mode});
    o.binary = BenchServer();
    auto server = ServerProcess::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    Clients c(server->get());
    for (int i = 0; i < 3; ++i) {
      rsslab::v1::HandleRequest req;
      req.set_id(100 + i);
      req.set_seed(i);
      (*req.mutable_params())["store"] = "1000";
      rsslab::v1::HandleResponse resp;
      grpc::Status st = c.Handle(req, &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
      EXPECT_EQ(resp.id(), 100u + i);
      EXPECT_EQ(resp.stored(), mode == "python");
    }
    rsslab::v1::Snapshot snap = c.Snapshot();
    EXPECT_EQ(snap.config().dispatch(), mode);
    EXPECT_EQ(snap.requests_served(), 3u);
    EXPECT_EQ(snap.cache().puts(), mode == "python" ? 3u : 0u);

    // rsslab_ctl says loudly when the handler is not called.
    ServerProcess::Result ctl = ServerProcess::Run(
        ServerProcess::Runfile("ctl/rsslab_ctl"),
        {"--control=" + (*server)->control_address(), "snapshot"});
    EXPECT_EQ(ctl.exit_code, 0) << ctl.err;
    EXPECT_EQ(absl::StrContains(ctl.out, "benchmark mode: the handler is not called"),
              mode != "python")
        << ctl.out;
    EXPECT_EQ((*server)->Stop(SIGTERM), 0);
  }
}

TEST(BenchServerTest, AnUnknownModeIsAUsageError) {
  ServerProcess::Result r = ServerProcess::Run(
      BenchServer(), {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0", "--dispatch=fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--dispatch must be python, pool or inline, got 'fast'"))
      << r.err;
}

}  // namespace
}  // namespace rsslab
