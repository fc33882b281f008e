// A handler cannot kill or wedge the server: SystemExit,
// KeyboardInterrupt and any BaseException fail only their call; a handler
// that loops is stopped by the per-request budget; a handler that blocks
// forever (at import or in a call) cannot stop SIGTERM from ending the
// process within a bounded time; out-of-range knobs never reach the handler.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/scrape.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;

ServerProcess::Options Hostile(std::vector<std::string> extra = {}) {
  ServerProcess::Options o = ServerProcess::TestServer(std::move(extra));
  o.args.push_back("--handler=" + ServerProcess::Runfile("tests/handlers/hostile.py"));
  return o;
}

grpc::Status Call(const std::string& target, const std::map<std::string, std::string>& params,
                  absl::Duration deadline = absl::Seconds(10)) {
  auto stub = rsslab::v1::Load::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  rsslab::v1::HandleRequest req;
  req.set_seed(7);
  for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  rsslab::v1::HandleResponse resp;
  return stub->Handle(&ctx, req, &resp);
}

TEST(IsolationTest, BaseExceptionsFailOnlyTheirCall) {
  auto s = ServerProcess::Start(Hostile({"--threads=2"}));
  ASSERT_TRUE(s.ok()) << s.status();
  ServerProcess* server = s->get();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"exit", "SystemExit: 4"},
      {"exit0", "SystemExit: 0"},
      {"kbd", "KeyboardInterrupt"},
      {"base", "Escape: not an Exception"},
  };
  for (const auto& [what, text] : cases) {
    grpc::Status st = Call(server->data_address(), {{"do", what}});
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL) << what << ": " << st.error_message();
    EXPECT_TRUE(absl::StrContains(st.error_message(), text)) << st.error_message();
    ASSERT_TRUE(server->Running()) << what << " killed the server: " << server->Stderr();
    EXPECT_TRUE(Call(server->data_address(), {}).ok()) << "not serving after " << what;
  }
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

TEST(IsolationTest, BudgetStopsALoopingCall) {
  auto s = ServerProcess::Start(Hostile({"--threads=1", "--handler_budget_ms=300"}));
  ASSERT_TRUE(s.ok()) << s.status();
  const absl::Time t0 = absl::Now();
  grpc::Status st = Call((*s)->data_address(), {{"do", "spin"}});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "--handler_budget_ms")) << st.error_message();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  // The only worker is free again.
  EXPECT_TRUE(Call((*s)->data_address(), {}).ok());
  EXPECT_EQ((*s)->Stop(SIGTERM), 0) << (*s)->Stderr();
}

TEST(IsolationTest, SigtermEndsAServerWhoseHandlerNeverReturns) {
  for (const char* what : {"block", "spin"}) {
    auto s = ServerProcess::Start(
        Hostile({"--threads=2", "--shutdown_grace_ms=500", "--handler_budget_ms=0"}));
    ASSERT_TRUE(s.ok()) << s.status();
    ServerProcess* server = s->get();
    std::thread caller([&] { Call(server->data_address(), {{"do", what}}, absl::Seconds(30)); });
    // Wait until the call is running: a busy worker in the snapshots.
    auto ctl = rsslab::v1::Control::NewStub(
        grpc::CreateChannel(server->control_address(), grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 500; ++i) {
      grpc::ClientContext ctx;
      rsslab::v1::Snapshot snap;
      ASSERT_TRUE(ctl->GetSnapshot(&ctx, rsslab::v1::SnapshotRequest(), &snap).ok());
      if (snap.workers().busy() == 1) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    const absl::Time t0 = absl::Now();
    const int code = server->Stop(SIGTERM, absl::Seconds(15));
    EXPECT_EQ(code, 3) << what << ": " << server->Stderr();
    EXPECT_LT(absl::Now() - t0, absl::Seconds(8)) << what;
    EXPECT_TRUE(absl::StrContains(server->Stderr(), "busy workers: rsslab-w")) << server->Stderr();
    caller.join();
  }
}

TEST(IsolationTest, SignalsEndAServerWhoseHandlerImportNeverReturns) {
  for (int sig : {SIGTERM, SIGINT}) {
    // Started by hand: it never prints its ready line.
    std::string bin = ServerProcess::Runfile("server/rsslab_server");
    const std::string marker = absl::StrCat(getenv("TEST_TMPDIR"), "/importing-", sig);
    unlink(marker.c_str());
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("RSSLAB_TEST_MARKER", marker.c_str(), 1);
      execl(bin.c_str(), bin.c_str(), "--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
            ("--handler=" + ServerProcess::Runfile("tests/handlers/hang_import.py")).c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    // Signalled once the import has begun (the handler made the marker).
    for (int i = 0; i < 1000 && access(marker.c_str(), F_OK) != 0; ++i) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_EQ(access(marker.c_str(), F_OK), 0) << "the handler's import never began";
    const absl::Time t0 = absl::Now();
    kill(pid, sig);
    int status = 0;
    pid_t r = 0;
    while ((r = waitpid(pid, &status, WNOHANG)) == 0 && absl::Now() - t0 < absl::Seconds(10)) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (r == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "signal " << sig << " ignored while the handler imports";
    }
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
  }
}

TEST(IsolationTest, ExitAtImportIsAnErrorNotASilentExit) {
  auto r = ServerProcess::Run(ServerProcess::Runfile("server/rsslab_server"),
                              {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                               "--handler=" + ServerProcess::Runfile("tests/handlers/exit_import.py")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "failed to import: SystemExit")) << r.err;
  r = ServerProcess::Run(ServerProcess::Runfile("server/rsslab_server"),
                         {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                          "--handler=" + ServerProcess::Runfile("tests/handlers/bad_knobs.py")});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "KNOBS has no bound for DEFAULTS[\"size\"]")) << r.err;
}

TEST(IsolationTest, DefaultHandlerKnobsAreBoundedBeforeTheHandlerRuns) {
  ServerProcess::Options o = ServerProcess::TestServer({"--threads=1", "--metrics_listen=127.0.0.1:0"});
  o.args.push_back("--handler=" + ServerProcess::Runfile("server/handlers/web_worker.py"));
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  ServerProcess* server = s->get();
  // Fill: web_worker serves.
  auto ctl = rsslab::v1::Control::NewStub(
      grpc::CreateChannel(server->control_address(), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    rsslab::v1::SetPhaseRequest req;
    req.set_phase("fill");
    rsslab::v1::SetPhaseResponse resp;
    ASSERT_TRUE(ctl->SetPhase(&ctx, req, &resp).ok());
  }
  for (const auto& [k, v] :
       std::vector<std::pair<std::string, std::string>>{{"dict_items", "100000000"},
                                                        {"dict_items", "-1"},
                                                        {"cap", "1000000000000"},
                                                        {"median", "nan"},
                                                        {"sigma", "1e308"},
                                                        {"store_p", "2"},
                                                        {"cap", std::string(3 << 20, '9')}}) {
    const absl::Time t0 = absl::Now();
    grpc::Status st = Call(server->data_address(), {{k, v}});
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << k << "=" << v.substr(0, 20);
    EXPECT_TRUE(absl::StrContains(st.error_message(), "param " + k)) << st.error_message();
    EXPECT_LT(st.error_message().size(), 300u);
    EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  }
  EXPECT_TRUE(Call(server->data_address(), {{"dict_items", "20000"}, {"cap", "8388608"}}).ok());
  EXPECT_EQ(server->Stop(SIGTERM), 0) << server->Stderr();
}

TEST(IsolationTest, HandlerErrorsAreLoggedRateLimitedAndCountedByType) {
  auto s = ServerProcess::Start(Hostile({"--threads=2", "--metrics_listen=127.0.0.1:0"}));
  ASSERT_TRUE(s.ok()) << s.status();
  ServerProcess* server = s->get();
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(Call(server->data_address(), {{"do", "valueerror"}}).error_code(),
              grpc::StatusCode::INTERNAL);
  }
  EXPECT_EQ(Call(server->data_address(), {{"do", "kbd"}}).error_code(), grpc::StatusCode::INTERNAL);
  std::string metrics = rsslab::testing::Body(rsslab::testing::Http(server->metrics_address(), "GET /metrics HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(absl::StrContains(metrics, "rsslab_handler_exceptions_total{type=\"ValueError\"} 200"))
      << metrics;
  EXPECT_TRUE(absl::StrContains(metrics, "rsslab_handler_exceptions_total{type=\"KeyboardInterrupt\"} 1"))
      << metrics;
  EXPECT_EQ(server->Stop(SIGTERM), 0);
  const std::string err = server->Stderr();
  // Five tracebacks, not 200.
  size_t tracebacks = 0;
  for (size_t p = 0; (p = err.find("Traceback (most recent call last)", p)) != std::string::npos; ++p) {
    ++tracebacks;
  }
  EXPECT_EQ(tracebacks, 5u) << err;
  EXPECT_LT(err.size(), 20000u) << err;
}

}  // namespace
}  // namespace rsslab
