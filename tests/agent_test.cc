// rsslab_agent end to end: a real agent process on loopback launching real
// servers. Every shipped profile launches verified; requests that try to name
// a path, an unknown flag or an unknown profile are refused; Stop reports
// the exit; a crashing server is reported with its status and log tail;
// max_servers holds.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "control/profiles.h"
#include "control/profiles_launch.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/agent.grpc.pb.h"
#include "proto/control.grpc.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;
using ::testing::HasSubstr;

std::string DirOf(const std::string& p) { return p.substr(0, p.find_last_of('/')); }

// The agent binary as a child of the test, with its ready line awaited.
class AgentProcess {
 public:
  static std::unique_ptr<AgentProcess> Start(int max_servers, const std::string& extra_profiles = "") {
    auto a = std::unique_ptr<AgentProcess>(new AgentProcess());
    const std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    a->log_dir_ = absl::StrCat(tmp, "/agent-logs-", max_servers);
    int out[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    launch::SpawnOptions so;
    so.binary = ServerProcess::Runfile("control/rsslab_agent");
    so.args = {"--listen=127.0.0.1:0",
               "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
               "--profiles=" + ServerProcess::Runfile("control/profiles.textproto") +
                   (extra_profiles.empty() ? "" : "," + extra_profiles),
               "--handler_dirs=" + DirOf(ServerProcess::Runfile("server/handlers/web_worker.py")) +
                   "," + DirOf(ServerProcess::Runfile("tests/handlers/import_error.py")),
               "--log_dir=" + a->log_dir_, absl::StrCat("--max_servers=", max_servers)};
    so.env = profiles::EnvStrings(profiles::CurrentEnviron());
    so.stdout_fd = out[1];
    absl::StatusOr<pid_t> pid = launch::Spawn(so);
    close(out[1]);
    EXPECT_TRUE(pid.ok()) << pid.status();
    a->pid_ = *pid;
    a->pump_ = std::make_unique<launch::OutputPump>(out[0], 2, false, "rsslab_agent ready ", false);
    launch::OutputPump::Result r = a->pump_->WaitReady(absl::Seconds(30));
    EXPECT_EQ(r.state, launch::OutputPump::kReady);
    for (absl::string_view f : absl::StrSplit(r.line, ' ')) {
      if (absl::ConsumePrefix(&f, "listen=")) a->address_ = std::string(f);
    }
    a->stub_ = v1::Agent::NewStub(
        grpc::CreateChannel(a->address_, grpc::InsecureChannelCredentials()));
    return a;
  }

  ~AgentProcess() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // SIGTERM; the agent's exit status.
  int Terminate() {
    kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    exited_ = true;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }

  grpc::Status Launch(const v1::LaunchRequest& req, v1::ServerProcess* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
    v1::LaunchResponse resp;
    grpc::Status s = stub_->Launch(&ctx, req, &resp);
    if (out != nullptr) *out = resp.server();
    return s;
  }
  grpc::Status Launch(const std::string& profile, const std::string& handler = "",
                      std::map<std::string, std::string> flags = {},
                      v1::ServerProcess* out = nullptr) {
    v1::LaunchRequest req;
    req.set_profile(profile);
    req.set_threads(2);
    req.set_handler(handler);
    for (const auto& kv : flags) (*req.mutable_server_flags())[kv.first] = kv.second;
    return Launch(req, out);
  }
  grpc::Status Stop(const std::string& id, v1::ServerProcess* out, int grace_ms = 0) {
    grpc::ClientContext ctx;
    v1::StopRequest req;
    req.set_id(id);
    req.set_grace_ms(grace_ms);
    v1::StopResponse resp;
    grpc::Status s = stub_->Stop(&ctx, req, &resp);
    if (out != nullptr) *out = resp.server();
    return s;
  }
  v1::ListResponse List() {
    grpc::ClientContext ctx;
    v1::ListResponse resp;
    EXPECT_TRUE(stub_->List(&ctx, v1::ListRequest(), &resp).ok());
    return resp;
  }
  v1::Agent::Stub* stub() { return stub_.get(); }

 private:
  pid_t pid_ = -1;
  bool exited_ = false;
  std::string address_, log_dir_;
  std::unique_ptr<launch::OutputPump> pump_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

v1::Snapshot GetSnapshot(const std::string& control) {
  auto stub = v1::Control::NewStub(grpc::CreateChannel(control, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::Snapshot snap;
  grpc::Status s = stub->GetSnapshot(&ctx, v1::SnapshotRequest(), &snap);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return snap;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    agent_ = AgentProcess::Start(/*max_servers=*/3);
    auto set = profiles::LoadProfiles(ServerProcess::Runfile("control/profiles.textproto"));
    ASSERT_TRUE(set.ok()) << set.status();
    profiles_ = *set;
  }
  std::unique_ptr<AgentProcess> agent_;
  v1::ProfileSet profiles_;
};

TEST_F(AgentTest, ListProfilesShowsTheFile) {
  grpc::ClientContext ctx;
  v1::ListProfilesResponse resp;
  ASSERT_TRUE(agent_->stub()->ListProfiles(&ctx, v1::ListProfilesRequest(), &resp).ok());
  ASSERT_EQ(resp.names_size(), profiles_.profile_size());
  EXPECT_EQ(resp.descriptions_size(), resp.names_size());
  EXPECT_THAT(std::vector<std::string>(resp.names().begin(), resp.names().end()),
              ::testing::Contains("mimalloc-purge0"));
}

TEST_F(AgentTest, EveryShippedProfileLaunchesVerifiedAndStops) {
  for (const v1::Profile& p : profiles_.profile()) {
    SCOPED_TRACE(p.name());
    v1::ServerProcess s;
    grpc::Status st = agent_->Launch(p.name(), "web_worker", {{"cache_limit_mb", "16"}}, &s);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_TRUE(s.running());
    EXPECT_EQ(s.profile(), p.name());
    EXPECT_EQ(s.threads(), 2);
    EXPECT_TRUE(absl::StartsWith(s.data_address(), "127.0.0.1:")) << s.data_address();
    EXPECT_GT(s.pid(), 0);
    EXPECT_EQ(s.verified_env_size(), p.env_size());
    if (!p.preload().empty()) {
      EXPECT_THAT(s.mapped_library(), HasSubstr("lib" + p.allocator())) << s.mapped_library();
    }
    // The agent's own /proc check, repeated here independently.
    absl::StatusOr<profiles::Verification> v = profiles::VerifyProfile(s.pid(), p);
    EXPECT_TRUE(v.ok()) << v.status();
    v1::Snapshot snap = GetSnapshot(s.control_address());
    EXPECT_EQ(snap.allocator(), p.allocator());
    EXPECT_EQ(snap.pid(), s.pid());
    EXPECT_EQ(access(s.log_path().c_str(), R_OK), 0);

    v1::ServerProcess stopped;
    st = agent_->Stop(s.id(), &stopped);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_FALSE(stopped.running());
    EXPECT_EQ(stopped.exit(), "exited 0");
    EXPECT_EQ(stopped.exit_code(), 0);
    EXPECT_GT(stopped.ended_unix_nanos(), stopped.started_unix_nanos());
    // Both stdout (ready line) and stderr (shutdown) reached the log.
    EXPECT_THAT(stopped.log_tail(), HasSubstr("rsslab_server: stopped"));
  }
}

TEST_F(AgentTest, RefusesPathsUnknownFlagsAndUnknownProfiles) {
  struct Case {
    std::string profile, handler;
    std::map<std::string, std::string> flags;
    grpc::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {"../glibc", "", {}, grpc::StatusCode::INVALID_ARGUMENT, "must be a profile name, not a path"},
      {"/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", "", {}, grpc::StatusCode::INVALID_ARGUMENT, "not a path"},
      {"glibc", "/etc/passwd", {}, grpc::StatusCode::INVALID_ARGUMENT, "must be a handler name"},
      {"glibc", "../../tests/handlers/test_handler", {}, grpc::StatusCode::INVALID_ARGUMENT, "not a path"},
      {"glibc", "web_worker.py", {}, grpc::StatusCode::INVALID_ARGUMENT, "not a path"},
      {"glibc", "", {{"listen", "0.0.0.0:1"}}, grpc::StatusCode::INVALID_ARGUMENT, "server flag 'listen' is not allowed"},
      {"glibc", "", {{"LD_PRELOAD", "/tmp/x.so"}}, grpc::StatusCode::INVALID_ARGUMENT, "server flag 'LD_PRELOAD' is not allowed"},
      {"glibc", "", {{"handler", "/tmp/x.py"}}, grpc::StatusCode::INVALID_ARGUMENT, "is not allowed"},
      {"glibc", "", {{"cache_limit_mb", "lots"}}, grpc::StatusCode::INVALID_ARGUMENT, "want an integer"},
      {"glibc", "", {{"thread_mode", "chaos"}}, grpc::StatusCode::INVALID_ARGUMENT, "want one of fixed,churn"},
      {"jemalloc-typo", "", {}, grpc::StatusCode::NOT_FOUND, "unknown profile 'jemalloc-typo' (known: glibc,"},
      {"glibc", "no_such_handler", {}, grpc::StatusCode::NOT_FOUND, "handler 'no_such_handler' not found (available:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.profile + " / " + c.handler);
    grpc::Status s = agent_->Launch(c.profile, c.handler, c.flags);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(c.message));
  }
  EXPECT_EQ(agent_->List().servers_size(), 0);  // nothing was started
  grpc::Status s = agent_->Stop("s9999-nope", nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(AgentTest, ServerThatDiesBeforeReadyIsReportedWithStatusAndLogTail) {
  grpc::Status s = agent_->Launch("jemalloc", "import_error");
  ASSERT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("exited before it was ready: exited 1"));
  EXPECT_THAT(s.error_message(), HasSubstr("this_module_does_not_exist_rsslab"));
  v1::ListResponse list = agent_->List();
  ASSERT_EQ(list.servers_size(), 1);
  const v1::ServerProcess& p = list.servers(0);
  EXPECT_FALSE(p.running());
  EXPECT_EQ(p.exit(), "exited 1");
  EXPECT_EQ(p.exit_code(), 1);
  EXPECT_THAT(p.log_tail(), HasSubstr("this_module_does_not_exist_rsslab"));
}

TEST_F(AgentTest, ServerKilledAfterLaunchIsReportedBySignal) {
  v1::ServerProcess s;
  ASSERT_TRUE(agent_->Launch("glibc", "", {}, &s).ok());
  ASSERT_EQ(kill(s.pid(), SIGKILL), 0);
  v1::ServerProcess stopped;
  ASSERT_TRUE(agent_->Stop(s.id(), &stopped).ok());
  EXPECT_EQ(stopped.exit(), "killed by SIGKILL");
  EXPECT_EQ(stopped.term_signal(), SIGKILL);
  v1::ListResponse list = agent_->List();
  ASSERT_EQ(list.servers_size(), 1);
  EXPECT_EQ(list.servers(0).exit(), "killed by SIGKILL");
}

TEST_F(AgentTest, MaxServersIsEnforced) {
  std::vector<std::string> ids;
  for (const char* p : {"glibc", "jemalloc", "mimalloc"}) {
    v1::ServerProcess s;
    grpc::Status st = agent_->Launch(p, "", {}, &s);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ids.push_back(s.id());
  }
  grpc::Status st = agent_->Launch("tcmalloc");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("max_servers=3 reached: 3 servers running (" + ids[0]));
  ASSERT_TRUE(agent_->Stop(ids[1], nullptr).ok());
  v1::ServerProcess s;
  st = agent_->Launch("tcmalloc", "", {}, &s);
  EXPECT_TRUE(st.ok()) << st.error_message();
  ids[1] = s.id();
  // The agent stops what it started when it is stopped.
  EXPECT_EQ(agent_->Terminate(), 0);
  EXPECT_EQ(kill(s.pid(), 0), -1);  // reaped by the agent: no such process
}

// A profile that does not take effect: the server starts, verification
// fails, the agent kills it and says what is missing.
TEST(AgentVerification, FailedVerificationKillsTheServer) {
  const std::string path =
      absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp", "/never.textproto");
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("profile { name: \"never\" allocator: \"glibc\" expect_mapped: \"libnever-mapped\" }\n", f);
  fclose(f);
  auto agent = AgentProcess::Start(/*max_servers=*/2, path);
  grpc::Status s = agent->Launch("never");
  ASSERT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("profile 'never' did not take effect in pid"));
  EXPECT_THAT(s.error_message(), HasSubstr("nothing matching 'libnever-mapped' is mapped"));
  EXPECT_THAT(s.error_message(), HasSubstr(") killed: "));
  v1::ListResponse list = agent->List();
  ASSERT_EQ(list.servers_size(), 1);
  EXPECT_FALSE(list.servers(0).running());
  EXPECT_EQ(list.servers(0).exit(), "killed by SIGKILL");
}

}  // namespace
}  // namespace rsslab
