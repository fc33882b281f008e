// rsslab_agent end to end: a real agent process on loopback launching real
// servers. Every shipped profile launches verified; requests that try to name
// a path, an unknown flag or an unknown profile are refused; Stop reports
// the exit; a crashing server is reported with its status and log tail;
// max_servers holds.
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/agent_state.h"
#include "agent/exit_text.h"
#include "agent/output_pump.h"
#include "agent/profiles.h"
#include "agent/spawn.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/agent.grpc.pb.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;
using ::testing::HasSubstr;

std::string DirOf(const std::string& p) { return p.substr(0, p.find_last_of('/')); }

// Under ASan (bazel test --config=asan) the launched server is instrumented
// too, and ASan's runtime must come first in a process: an LD_PRELOAD'ed
// allocator stops it at start. There these cases run on glibc profiles
// (distinct ones, where the case needs distinct servers) and the shipped
// preloaded profiles are skipped (docs/TESTING.md#sanitizers).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kPreloadsRun = false;
#else
constexpr bool kPreloadsRun = true;
#endif
std::string P(const std::string& profile) {
  if (kPreloadsRun) return profile;
  if (profile == "jemalloc") return "glibc-arena2";
  if (profile == "mimalloc") return "glibc-arena4";
  if (profile == "tcmalloc") return "pymalloc-off";
  return profile;
}

// The agent binary as a child of the test, with its ready line awaited.
class AgentProcess {
 public:
  static std::unique_ptr<AgentProcess> Start(int max_servers, const std::string& extra_profiles = "",
                                             const std::vector<std::string>& extra_args = {},
                                             const std::string& stderr_path = "") {
    auto a = std::unique_ptr<AgentProcess>(new AgentProcess());
    const std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
    a->log_dir_ = absl::StrCat(tmp, "/agent-logs-", max_servers);
    int err_fd = -1;
    if (!stderr_path.empty()) {
      err_fd = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      EXPECT_GE(err_fd, 0) << stderr_path;
    }
    int out[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    launch::SpawnOptions so;
    so.binary = ServerProcess::Runfile("agent/rsslab_agent");
    so.args = {"--listen=127.0.0.1:0",
               "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
               "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto") +
                   (extra_profiles.empty() ? "" : "," + extra_profiles),
               "--handler_dirs=" + DirOf(ServerProcess::Runfile("server/handlers/web_worker.py")) +
                   "," + DirOf(ServerProcess::Runfile("tests/handlers/import_error.py")),
               "--log_dir=" + a->log_dir_, absl::StrCat("--max_servers=", max_servers)};
    for (const std::string& e : extra_args) so.args.push_back(e);
    so.env = profiles::EnvStrings(profiles::CurrentEnviron());
    so.stdout_fd = out[1];
    so.stderr_fd = err_fd;
    absl::StatusOr<pid_t> pid = launch::Spawn(so);
    close(out[1]);
    if (err_fd >= 0) close(err_fd);
    EXPECT_TRUE(pid.ok()) << pid.status();
    a->pid_ = *pid;
    a->pump_ = std::make_unique<launch::OutputPump>(
        out[0], 2, false, launch::LineMatch::Prefix("rsslab_agent ready "), false);
    launch::OutputPump::Result r = a->pump_->WaitReady(absl::Seconds(30));
    a->ready_ = r.state == launch::OutputPump::kReady;
    EXPECT_TRUE(a->ready_ || !stderr_path.empty());  // callers with stderr expect failures
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

  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }

  // A crash: SIGKILL, nothing of the agent runs after it.
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    exited_ = true;
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
  bool ready_ = false;
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
    auto set = profiles::LoadProfiles(ServerProcess::Runfile("agent/profiles.textproto"));
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
    if (!kPreloadsRun && !p.preload().empty()) continue;
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
  grpc::Status s = agent_->Launch(P("jemalloc"), "import_error");
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
    grpc::Status st = agent_->Launch(P(p), "", {}, &s);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ids.push_back(s.id());
  }
  grpc::Status st = agent_->Launch(P("tcmalloc"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(st.error_message(), HasSubstr("max_servers=3 reached: 3 servers running (" + ids[0]));
  ASSERT_TRUE(agent_->Stop(ids[1], nullptr).ok());
  v1::ServerProcess s;
  st = agent_->Launch(P("tcmalloc"), "", {}, &s);
  EXPECT_TRUE(st.ok()) << st.error_message();
  ids[1] = s.id();
  // The agent stops what it started when it is stopped.
  EXPECT_EQ(agent_->Terminate(), 0);
  EXPECT_EQ(kill(s.pid(), 0), -1);  // reaped by the agent: no such process
}

// Hardening class 7 (docs/RELIABILITY.md): two concurrent Stops of one server once sent two
// SIGTERMs; the second made the server exit at once (143 seen), cutting
// the call the first let drain. Now the second waits for the first and
// both get the same answer; the call in flight finishes.
TEST_F(AgentTest, ConcurrentStopsDrainLikeSigtermAndBothGetTheSameAnswer) {
  v1::ServerProcess s;
  grpc::Status st = agent_->Launch("glibc", "test_handler", {}, &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto load = v1::Load::NewStub(
      grpc::CreateChannel(s.data_address(), grpc::InsecureChannelCredentials()));
  grpc::Status call;
  std::thread caller([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::HandleRequest req;
    (*req.mutable_params())["sleep_ms"] = "1500";
    v1::HandleResponse resp;
    call = load->Handle(&ctx, req, &resp);
  });
  // The call is on a worker once the snapshot shows it busy.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (absl::Now() < until && GetSnapshot(s.control_address()).workers().busy() == 0) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  v1::ServerProcess a, b;
  grpc::Status sa, sb;
  std::thread t1([&] { sa = agent_->Stop(s.id(), &a, 10000); });
  std::thread t2([&] { sb = agent_->Stop(s.id(), &b, 10000); });
  t1.join();
  t2.join();
  caller.join();
  EXPECT_TRUE(call.ok()) << call.error_message();
  ASSERT_TRUE(sa.ok()) << sa.error_message();
  ASSERT_TRUE(sb.ok()) << sb.error_message();
  EXPECT_EQ(a.exit_code(), 0) << a.exit();
  EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
}

// Hardening class 7 (docs/RELIABILITY.md): the NOT_FOUND for an unknown id listed every id ever
// launched; past about 600 launches it outgrew gRPC's metadata limit and
// came back RESOURCE_EXHAUSTED. Now it names at most 16 running servers and
// ended runs beyond the latest 64 are forgotten (List stays bounded).
TEST_F(AgentTest, UnknownIdIsNotFoundWithABoundedMessageAfterManyLaunches) {
  for (int i = 0; i < 70; ++i) {
    v1::ServerProcess s;
    grpc::Status st = agent_->Launch("glibc", "noop", {}, &s);
    ASSERT_TRUE(st.ok()) << i << ": " << st.error_message();
    ASSERT_TRUE(agent_->Stop(s.id(), nullptr).ok());
  }
  grpc::Status st = agent_->Stop("\x1b[2J" + std::string(5000, 'x'), nullptr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_LT(st.error_message().size(), 512u) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("\\x1b[2J")) << st.error_message();
  EXPECT_LE(agent_->List().servers_size(), 64);
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

// --- An agent restarted while its servers run (--state_dir) ---------------

std::string TmpPath(const std::string& name) {
  return absl::StrCat(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp", "/", name);
}

std::string ReadAll(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

// Gone, or a zombie nobody has reaped yet (an orphan's reaper is not ours).
bool ProcessEnded(pid_t pid) {
  absl::StatusOr<agent_state::ProcStat> st = agent_state::ReadProcStat(pid);
  return !st.ok() || st->state == 'Z';
}

bool WaitEnded(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (ProcessEnded(pid)) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return ProcessEnded(pid);
}

grpc::Status Handle(const std::string& data_address) {
  auto stub = v1::Load::NewStub(grpc::CreateChannel(data_address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::HandleRequest req;
  req.set_id(7);
  v1::HandleResponse resp;
  return stub->Handle(&ctx, req, &resp);
}

std::vector<std::string> StateArgs(const std::string& dir) { return {"--state_dir=" + dir}; }

TEST(AgentRestart, KilledAgentsServerIsAdoptedServesAndStops) {
  const std::string dir = TmpPath("state-adopt");
  auto first = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  v1::ServerProcess s;
  // A handler that writes to stdout on every call: after the agent is gone
  // that must not kill the server (no pipe to the dead agent, no SIGPIPE).
  grpc::Status st = first->Launch(P("jemalloc"), "chatty_stdout", {}, &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(Handle(s.data_address()).ok());
  first->Kill();

  // The orphan keeps serving, stdout writes included.
  for (int i = 0; i < 20; ++i) {
    grpc::Status h = Handle(s.data_address());
    ASSERT_TRUE(h.ok()) << h.error_message();
  }
  ASSERT_FALSE(ProcessEnded(s.pid()));
  // The log writer (a process of its own, also outliving the agent) writes
  // what the server printed a moment later: wait for it, briefly.
  std::string log = ReadAll(s.log_path());
  for (int i = 0; i < 250 && !absl::StrContains(log, "chatty_stdout: request"); ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    log = ReadAll(s.log_path());
  }
  EXPECT_THAT(log, HasSubstr("chatty_stdout: request"));

  const std::string err = TmpPath("agent-adopt.stderr");
  auto second = AgentProcess::Start(/*max_servers=*/1, "", StateArgs(dir), err);
  ASSERT_TRUE(second->ready()) << ReadAll(err);
  v1::ListResponse list = second->List();
  ASSERT_EQ(list.servers_size(), 1);
  const v1::ServerProcess& a = list.servers(0);
  EXPECT_EQ(a.id(), s.id());
  EXPECT_EQ(a.pid(), s.pid());
  EXPECT_TRUE(a.adopted());
  EXPECT_TRUE(a.running());
  EXPECT_EQ(a.lost(), "");
  EXPECT_EQ(a.control_address(), s.control_address());
  EXPECT_EQ(a.profile(), P("jemalloc"));
  EXPECT_THAT(ReadAll(err), HasSubstr("adopted server " + s.id()));
  v1::Snapshot snap = GetSnapshot(a.control_address());
  EXPECT_EQ(snap.pid(), s.pid());
  EXPECT_EQ(snap.allocator(), kPreloadsRun ? "jemalloc" : "glibc");

  // max_servers counts the adopted server; new ids do not collide with it.
  grpc::Status full = second->Launch("glibc");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
  EXPECT_THAT(full.error_message(), HasSubstr(s.id()));

  v1::ServerProcess stopped;
  st = second->Stop(s.id(), &stopped, /*grace_ms=*/10000);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(stopped.running());
  EXPECT_TRUE(stopped.adopted());
  EXPECT_THAT(stopped.exit(), HasSubstr("exit status unknown"));
  EXPECT_EQ(stopped.exit_code(), -1);
  EXPECT_TRUE(ProcessEnded(s.pid()));
  // SIGTERM, not SIGKILL: the server drained and said so in its log.
  EXPECT_THAT(stopped.log_tail(), HasSubstr("rsslab_server: stopped"));

  // The slot is free again, and the state file now lists only the new one.
  v1::ServerProcess fresh;
  st = second->Launch("glibc", "", {}, &fresh);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_NE(fresh.id(), s.id());
  const std::string state = ReadAll(dir + "/servers.json");
  EXPECT_THAT(state, HasSubstr(fresh.id()));
  EXPECT_THAT(state, ::testing::Not(HasSubstr(s.id())));
  // A clean stop still stops everything and leaves an empty record.
  EXPECT_EQ(second->Terminate(), 0);
  EXPECT_TRUE(ProcessEnded(fresh.pid()));
  EXPECT_THAT(ReadAll(dir + "/servers.json"), ::testing::Not(HasSubstr(fresh.id())));
}

TEST(AgentRestart, AdoptedServerThatDiesIsNoticed) {
  const std::string dir = TmpPath("state-dies");
  auto first = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  v1::ServerProcess s;
  ASSERT_TRUE(first->Launch("glibc", "", {}, &s).ok());
  first->Kill();
  auto second = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  ASSERT_TRUE(second->List().servers(0).running());
  ASSERT_EQ(kill(s.pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitEnded(s.pid(), absl::Seconds(10)));
  v1::ServerProcess p;
  for (int i = 0; i < 100; ++i) {  // the agent polls /proc every 100 ms
    p = second->List().servers(0);
    if (!p.running()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(p.running());
  EXPECT_THAT(p.exit(), HasSubstr("exit status unknown"));
  EXPECT_THAT(ReadAll(dir + "/servers.json"), ::testing::Not(HasSubstr(s.id())));
}

TEST(AgentRestart, ServerKilledWhileNoAgentRanIsReportedLostOnce) {
  const std::string dir = TmpPath("state-lost");
  auto first = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  v1::ServerProcess s;
  ASSERT_TRUE(first->Launch("glibc", "", {}, &s).ok());
  first->Kill();
  ASSERT_EQ(kill(s.pid(), SIGKILL), 0);
  ASSERT_TRUE(WaitEnded(s.pid(), absl::Seconds(10)));

  const std::string err = TmpPath("agent-lost.stderr");
  auto second = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir), err);
  ASSERT_TRUE(second->ready()) << ReadAll(err);
  v1::ListResponse list = second->List();
  ASSERT_EQ(list.servers_size(), 1);
  const v1::ServerProcess& p = list.servers(0);
  EXPECT_EQ(p.id(), s.id());
  EXPECT_FALSE(p.running());
  EXPECT_THAT(p.lost(), HasSubstr(absl::StrCat("pid ", s.pid())));
  EXPECT_THAT(p.exit(), HasSubstr("lost: "));
  EXPECT_THAT(ReadAll(err), HasSubstr("lost server " + s.id()));
  // Stop on it says how it ended instead of signalling anything.
  v1::ServerProcess stopped;
  ASSERT_TRUE(second->Stop(s.id(), &stopped).ok());
  EXPECT_FALSE(stopped.lost().empty());
  // Reported once: dropped from the state file, unknown to the next agent.
  EXPECT_EQ(second->Terminate(), 0);
  auto third = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  EXPECT_EQ(third->List().servers_size(), 0);
}

TEST(AgentRestart, CorruptStateFileIsSetAsideWithOneWarning) {
  const std::string dir = TmpPath("state-corrupt");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  FILE* f = fopen((dir + "/servers.json").c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("{\"servers\": [{\"server\": {\"id\": \"s0001-glibc-t2\", \"pid\": 12", f);  // torn
  fclose(f);
  const std::string err = TmpPath("agent-corrupt.stderr");
  auto agent = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir), err);
  ASSERT_TRUE(agent->ready()) << ReadAll(err);
  const std::string log = ReadAll(err);
  std::vector<std::string> warnings;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "WARNING")) warnings.emplace_back(line);
  }
  ASSERT_EQ(warnings.size(), 1u) << log;
  EXPECT_THAT(warnings[0], HasSubstr("servers.json is unreadable"));
  EXPECT_THAT(warnings[0], HasSubstr("moved to " + dir + "/servers.json.corrupt-"));
  const std::string aside = warnings[0].substr(warnings[0].find("moved to ") + 9);
  EXPECT_THAT(ReadAll(aside.substr(0, aside.find(';'))), HasSubstr("s0001-glibc-t2"));
  EXPECT_EQ(agent->List().servers_size(), 0);
  v1::ServerProcess s;
  const grpc::Status launched = agent->Launch("glibc", "", {}, &s);
  ASSERT_TRUE(launched.ok()) << launched.error_message();  // and it works
  EXPECT_THAT(ReadAll(dir + "/servers.json"), HasSubstr(s.id()));
}

TEST(AgentRestart, TwoAgentsOnOneStateDirAreRefused) {
  const std::string dir = TmpPath("state-two");
  auto first = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  const std::string err = TmpPath("agent-two.stderr");
  auto second = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir), err);
  EXPECT_FALSE(second->ready());
  EXPECT_EQ(second->Terminate(), 2);
  EXPECT_THAT(ReadAll(err), HasSubstr(absl::StrCat("is in use by another rsslab_agent (pid ",
                                                   first->pid(), ")")));
}


TEST(AgentRestart, ServerOfALaunchCutShortByTheAgentsDeathIsStopped) {
  const std::string dir = TmpPath("state-midlaunch");
  auto first = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  grpc::Status launch_status;
  std::thread launching([&] { launch_status = first->Launch("glibc", "slow_import"); });
  // The record is written at spawn, before the (60 s) import finishes.
  absl::StatusOr<v1::AgentState> st;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    st = agent_state::Read(dir + "/servers.json");
    if (st.ok() && st->servers_size() == 1) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(st.ok() && st->servers_size() == 1);
  const pid_t pid = st->servers(0).server().pid();
  EXPECT_EQ(st->servers(0).server().data_address(), "");  // not ready yet
  first->Kill();
  launching.join();
  EXPECT_FALSE(launch_status.ok());
  ASSERT_FALSE(ProcessEnded(pid));  // orphaned, still importing

  auto second = AgentProcess::Start(/*max_servers=*/2, "", StateArgs(dir));
  v1::ListResponse list = second->List();
  ASSERT_EQ(list.servers_size(), 1);
  EXPECT_FALSE(list.servers(0).running());
  EXPECT_THAT(list.servers(0).lost(), HasSubstr("never reported ready"));
  EXPECT_TRUE(WaitEnded(pid, absl::Seconds(10)));
}

}  // namespace
}  // namespace rsslab
