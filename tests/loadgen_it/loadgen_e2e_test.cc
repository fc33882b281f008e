// rsslab_loadgen end to end against a real rsslab_server on loopback: the
// seed scenario, open versus closed loop against a stalling handler, and the
// faults (unreachable, server killed mid-step, SIGINT, bad input).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/control.grpc.pb.h"
#include "proto/results.pb.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Child;
using ::rsslab::testing::Events;
using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::ServerProcess;
using ::rsslab::testing::StartServer;
using ::rsslab::testing::Tmp;
using ::rsslab::v1::Event;
using ::testing::HasSubstr;

std::vector<std::string> Addr(const ServerProcess& s) {
  return {"--target=" + s.data_address(), "--control=" + s.control_address()};
}

const Event* FindLoad(const std::vector<Event>& ev) {
  for (const auto& e : ev) {
    if (e.has_load()) return &e;
  }
  return nullptr;
}

TEST(LoadgenE2E, SeedAtTinyScaleRecordsEveryPhaseAndFillsTheSummary) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("seed_run");
  auto args = Addr(*server);
  args.insert(args.end(), {"--builtin=seed", "--scale=0.01", "--out=" + out});
  auto r = ServerProcess::Run(Loadgen(), args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("run directory: " + out));

  auto ev = Events(out);
  ASSERT_GE(ev.size(), 10u);
  EXPECT_TRUE(ev.front().has_header());
  EXPECT_EQ(ev.front().header().scenario_name(), "seed");
  EXPECT_GE(ev.front().header().argv_size(), 4);
  EXPECT_TRUE(ev.back().has_footer());
  EXPECT_TRUE(ev.back().footer().completed());
  std::map<std::string, int> loads, snaps;
  bool trim = false;
  for (const auto& e : ev) {
    if (e.has_load()) {
      loads[e.load().step()]++;
      EXPECT_EQ(e.load().requests_failed(), 0u);
      EXPECT_EQ(e.load().status_counts().at("OK"), e.load().requests_ok());
    }
    if (e.has_snapshot()) snaps[e.loadgen_phase()]++;
    if (e.has_phase() && e.loadgen_phase() == "trim") {
      trim = true;
      EXPECT_TRUE(e.phase().has_trim());
    }
    if (e.has_step()) {
      EXPECT_TRUE(e.step().ok()) << e.step().error();
    }
  }
  EXPECT_EQ(loads["fill"], 1);
  EXPECT_EQ(loads["shrink"], 1);
  EXPECT_EQ(snaps["fill"], 1);
  EXPECT_EQ(snaps["shrink"], 1);
  EXPECT_EQ(snaps["idle"], 1);
  EXPECT_TRUE(trim);
  const Event* fill = FindLoad(ev);
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->load().requests_ok(), 960u);  // 96,000 x 0.01

  // summary.csv: every column filled.
  std::vector<std::string> lines = absl::StrSplit(ReadFile(out + "/summary.csv"), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  std::vector<std::string> cols = absl::StrSplit(lines[0], ',');
  std::vector<std::string> vals = absl::StrSplit(lines[1], ',');
  ASSERT_EQ(cols.size(), vals.size());
  for (size_t i = 0; i < cols.size(); ++i) {
    EXPECT_TRUE(!vals[i].empty() && vals[i] != "-") << cols[i] << " is empty";
  }
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("**completed**"));

  // `report` rebuilds the same summary from events.jsonl alone.
  const std::string csv = ReadFile(out + "/summary.csv");
  unlink((out + "/summary.csv").c_str());
  auto rep = ServerProcess::Run(Loadgen(), {"report", out});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(ReadFile(out + "/summary.csv"), csv);
  EXPECT_EQ(server->Stop(), 0);
}

double P99Ms(const std::string& dir) {
  const auto ev = Events(dir);
  const Event* l = FindLoad(ev);
  return l ? l->load().latency().p99_us() / 1000 : -1;
}

TEST(LoadgenE2E, OpenLoopP99ShowsAOneSecondStallClosedLoopHidesIt) {
  // Closed loop, one request in flight: the stall delays one request.
  {
    auto server = StartServer(1, "stall_once.py");
    ASSERT_NE(server, nullptr);
    const std::string out = Tmp("closed_stall");
    auto r = ServerProcess::Run(
        Loadgen(), {"--target=" + server->data_address(), "--control=",
                    "--concurrency=1", "--channels=1", "--requests=300",
                    "--params=stall=1", "--out=" + out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto ev = Events(out);
    const Event* l = FindLoad(ev);
    ASSERT_NE(l, nullptr);
    EXPECT_GE(l->load().latency().max_us(), 900000);  // the stall happened
    EXPECT_LT(P99Ms(out), 200) << "closed loop p99 should hide the stall";
  }
  // Open loop, 100/s for 3 s: ~100 requests were due during the stall.
  {
    auto server = StartServer(1, "stall_once.py");
    ASSERT_NE(server, nullptr);
    const std::string out = Tmp("open_stall");
    auto r = ServerProcess::Run(
        Loadgen(), {"--target=" + server->data_address(), "--control=",
                    "--rate=100", "--channels=1", "--duration=3s",
                    "--params=stall=1", "--out=" + out});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto ev = Events(out);
    const Event* l = FindLoad(ev);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->load().mode(), "open");
    EXPECT_GE(P99Ms(out), 500) << "open loop p99 must reflect the stall";
    EXPECT_GE(l->load().latency().p90_us(), 100000);
  }
}

TEST(LoadgenE2E, UnreachableServerIsOneLineNamingTheAddress) {
  const absl::Time t0 = absl::Now();
  auto r = ServerProcess::Run(
      Loadgen(), {"--builtin=quick", "--target=127.0.0.1:1",
                  "--control=127.0.0.1:1", "--connect_timeout=1s",
                  "--out=" + Tmp("unreachable")});
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot reach the server's control service at 127.0.0.1:1"));
  // Load-only: the data address is named.
  auto r2 = ServerProcess::Run(
      Loadgen(), {"--requests=10", "--target=127.0.0.1:1", "--control=",
                  "--connect_timeout=1s", "--out=" + Tmp("unreachable2")});
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_THAT(r2.err, HasSubstr("cannot connect to the server at 127.0.0.1:1 within 1s"));
}

// A real server's replies over --max_receive_mb (the bodies --return_body
// asks for) fail the step with a line naming the size and the flag; the
// same replies under the bound pass.
TEST(LoadgenE2E, RepliesOverMaxReceiveMbFailNamingTheFlag) {
  auto server = StartServer(1, "test_handler.py");
  ASSERT_NE(server, nullptr);
  auto run = [&](const std::string& store, const std::string& out) {
    return ServerProcess::Run(
        Loadgen(), {"--target=" + server->data_address(), "--control=", "--concurrency=1",
                    "--channels=1", "--requests=3", "--return_body", "--params=store=" + store,
                    "--max_receive_mb=1", "--progress=none", "--out=" + out});
  };
  auto over = run("1500000", Tmp("over_bound"));
  EXPECT_EQ(over.exit_code, 1) << over.err;
  EXPECT_THAT(over.err, HasSubstr("RESOURCE_EXHAUSTED: Received message larger than max (1500"));
  EXPECT_THAT(over.err, HasSubstr("a reply over --max_receive_mb=1 (raise it"));
  const auto ev = Events(Tmp("over_bound"));
  const Event* l = FindLoad(ev);
  ASSERT_NE(l, nullptr);  // the failed step is recorded
  EXPECT_THAT(l->load().first_error(), HasSubstr("--max_receive_mb=1"));
  EXPECT_TRUE(ev.back().has_footer());

  auto under = run("900000", Tmp("under_bound"));
  EXPECT_EQ(under.exit_code, 0) << under.err;
  EXPECT_EQ(server->Stop(), 0);
}

TEST(LoadgenE2E, ServerKilledMidStepFailsTheStepAndKeepsTheRecords) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("killed");
  auto args = Addr(*server);
  args.insert(args.end(), {"--builtin=seed", "--deadline_ms=3000",
                           "--connect_timeout=2s", "--out=" + out});
  Child lg(Loadgen(), args);
  ASSERT_TRUE(lg.WaitForStderr("fill: load started", absl::Seconds(30))) << lg.Stderr();
  // Really mid-step: wait until the server has served part of the fill.
  auto stub = rsslab::v1::Control::NewStub(grpc::CreateChannel(
      server->control_address(), grpc::InsecureChannelCredentials()));
  uint64_t served = 0;
  for (const absl::Time end = absl::Now() + absl::Seconds(30);
       served < 200 && absl::Now() < end;) {
    grpc::ClientContext cc;
    rsslab::v1::Snapshot snap;
    if (stub->GetSnapshot(&cc, rsslab::v1::SnapshotRequest(), &snap).ok()) {
      served = snap.requests_served();
    }
  }
  ASSERT_GE(served, 200u);
  ASSERT_EQ(kill(server->pid(), SIGKILL), 0);
  EXPECT_EQ(lg.Wait(absl::Seconds(30)), 1) << lg.Stderr();
  EXPECT_THAT(lg.Stderr(), HasSubstr("fill: load FAILED"));
  auto ev = Events(out);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_TRUE(ev.front().has_header());
  EXPECT_TRUE(ev[1].has_phase());  // the fill switch, written before the kill
  const Event* l = FindLoad(ev);
  ASSERT_NE(l, nullptr);
  EXPECT_FALSE(l->load().first_error().empty());
  bool failed_step = false;
  for (const auto& e : ev) {
    if (e.has_step() && e.step().step() == "fill" && e.step().kind() == "load") {
      failed_step = !e.step().ok();
      // The status of the RPCs that failed (UNAVAILABLE, connection lost).
      EXPECT_THAT(e.step().error(), HasSubstr("RPCs failed"));
    }
  }
  EXPECT_TRUE(failed_step);
  ASSERT_TRUE(ev.back().has_footer());
  EXPECT_FALSE(ev.back().footer().completed());
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("INCOMPLETE"));
}

TEST(LoadgenE2E, SigintStopsSendingDrainsAndSummarisesWhatCompleted) {
  auto server = StartServer(2);
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("sigint");
  auto args = Addr(*server);
  args.insert(args.end(), {"--builtin=seed", "--out=" + out});
  Child lg(Loadgen(), args);
  ASSERT_TRUE(lg.WaitForStderr("fill: load started", absl::Seconds(30))) << lg.Stderr();
  ASSERT_EQ(kill(lg.pid(), SIGINT), 0);
  EXPECT_EQ(lg.Wait(absl::Seconds(30)), 130) << lg.Stderr();
  auto ev = Events(out);
  const Event* l = FindLoad(ev);
  ASSERT_NE(l, nullptr);
  EXPECT_TRUE(l->load().interrupted());
  EXPECT_EQ(l->load().requests_failed(), 0u);  // in-flight RPCs were drained
  EXPECT_LT(l->load().requests_ok(), 96000u);
  ASSERT_TRUE(ev.back().has_footer());
  EXPECT_FALSE(ev.back().footer().completed());
  const std::string md = ReadFile(out + "/summary.md");
  EXPECT_THAT(md, HasSubstr("INCOMPLETE"));
  EXPECT_THAT(md, HasSubstr("fill (interrupted)"));
  EXPECT_EQ(server->Stop(), 0);
}

TEST(LoadgenE2E, BadInputIsRejectedBeforeAnyTraffic) {
  auto server = StartServer(1);
  ASSERT_NE(server, nullptr);
  const std::string bad = Tmp("bad.txtpb");
  std::ofstream(bad) << "name: \"bad\"\nstep { set_phase { phase: \"fil\" } }\n"
                        "step { load { requests: 10 rate: 5 concurrency: 2 } }\n";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--scenario=" + bad}, "bad.txtpb:2: step 1: set_phase: unknown phase \"fil\""},
      {{"--scenario=" + bad}, "bad.txtpb:3: step 2: load: rate (open loop"},
      {{"--builtin=nope"}, "unknown builtin scenario \"nope\""},
      {{"--builtin=seed", "--rate=100", "--concurrency=8"},
       "--rate (open loop: requests leave on a schedule) and --concurrency"},
      {{"--builtin=seed", "--scenario=" + bad}, "alternatives"},
      {{"--requests=5", "--duration=2s"}, "--requests and --duration are alternatives"},
      {{"--builtin=quick", "--wait=-1s"}, "--wait=-1s: a wait step lasts 1ms to 24h"},
      {{"--builtin=quick", "--wait=25h"}, "--wait=25h: a wait step lasts 1ms to 24h"},
      {{"--builtin=quick", "--max_receive_mb=0"}, "--max_receive_mb"},
      {{"--builtin=quick", "--max_receive_mb=2048"}, "--max_receive_mb"},
  };
  for (const auto& c : cases) {
    auto args = Addr(*server);
    args.insert(args.end(), c.args.begin(), c.args.end());
    args.push_back("--out=" + Tmp("never"));
    auto r = ServerProcess::Run(Loadgen(), args);
    EXPECT_EQ(r.exit_code, 2) << c.message;
    EXPECT_THAT(r.err, HasSubstr(c.message));
  }
  EXPECT_NE(access(Tmp("never").c_str(), F_OK), 0);  // no run directory
  // The server saw nothing.
  auto ch = grpc::CreateChannel(server->control_address(), grpc::InsecureChannelCredentials());
  auto stub = rsslab::v1::Control::NewStub(ch);
  grpc::ClientContext cc;
  rsslab::v1::Snapshot snap;
  ASSERT_TRUE(stub->GetSnapshot(&cc, rsslab::v1::SnapshotRequest(), &snap).ok());
  EXPECT_EQ(snap.requests_served(), 0u);
  EXPECT_EQ(snap.phase(), "start");
}

}  // namespace
}  // namespace rsslab
