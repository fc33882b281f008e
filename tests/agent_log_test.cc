// A launched program's log stays under the agent's --log_max_mb however
// much the program prints, keeping its first and last lines and a line
// saying how much was dropped; the tails Stop and a failed Launch report
// still end with the program's last words.
#include <dirent.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/agent.grpc.pb.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr int kLines = 400000;  // ~8 MB of "chatty line N"
// Prints its first words, the ready line, kLines lines as fast as it can,
// its last words, then waits to be stopped.
const std::string kChatty = absl::StrCat(
    "-c 'echo first words; echo chatty ready; seq -f \"chatty line %.0f\" 1 ", kLines,
    "; echo last words; exec sleep 600' {port}");
// The same, dying before it is ready, its last words on stderr.
const std::string kDies = absl::StrCat("-c 'echo first words; seq -f \"chatty line %.0f\" 1 ",
                                       kLines, "; echo dying words >&2; exit 3' {port}");

int64_t DirBytes(const std::string& dir) {
  int64_t total = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    struct stat st;
    if (stat(absl::StrCat(dir, "/", e->d_name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      total += st.st_size;
    }
  }
  closedir(d);
  return total;
}

class AgentLog : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string server = ServerProcess::Runfile("server/rsslab_server");
    ServerProcess::Options o;
    o.binary = ServerProcess::Runfile("agent/rsslab_agent");
    o.args = {"--listen=127.0.0.1:0", "--state_dir=none", "--log_dir=" + logs_,
              "--log_max_mb=1", "--server_binary=" + server,
              "--handler_dirs=" + server_handlers(),
              "--profiles=" + ServerProcess::Runfile("agent/profiles.textproto"),
              "--allow_command=chatty=/bin/sh", "--allow_command_args=chatty=" + kChatty,
              "--allow_command_ready=chatty=^chatty ready",
              "--allow_command=dies=/bin/sh", "--allow_command_args=dies=" + kDies,
              "--allow_command_ready=dies=^never printed"};
    o.ready_prefix = "rsslab_agent ready ";
    auto a = ServerProcess::Start(o);
    ASSERT_TRUE(a.ok()) << a.status();
    agent_ = *std::move(a);
    stub_ = v1::Agent::NewStub(
        grpc::CreateChannel(agent_->Field("listen"), grpc::InsecureChannelCredentials()));
  }

  static std::string server_handlers() {
    const std::string p = ServerProcess::Runfile("server/handlers/web_worker.py");
    return p.substr(0, p.rfind('/'));
  }

  grpc::Status Launch(const std::string& command, v1::ServerProcess* out) {
    v1::LaunchRequest req;
    req.set_profile("glibc");
    req.set_command(command);
    v1::LaunchResponse resp;
    grpc::ClientContext cc;
    cc.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    grpc::Status s = stub_->Launch(&cc, req, &resp);
    *out = resp.server();
    return s;
  }

  // One directory per test: each holds one launch's log.
  const std::string logs_ =
      Tmp(::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::unique_ptr<ServerProcess> agent_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(AgentLog, AChattyProgramsLogStaysUnderTheCapWithItsHeadAndTail) {
  v1::ServerProcess s;
  grpc::Status st = Launch("chatty", &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const std::string last = absl::StrCat("chatty line ", kLines, "\nlast words\n");
  std::string text;
  for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(50))) {
    text = ReadFile(s.log_path());
    if (absl::EndsWith(text, last)) break;
  }
  ASSERT_TRUE(absl::EndsWith(text, last)) << text.substr(text.size() - std::min<size_t>(text.size(), 300));
  EXPECT_LE(DirBytes(logs_), 1 << 20);
  EXPECT_LE(text.size(), 1u << 20);
  EXPECT_TRUE(absl::StartsWith(text, "# rsslab_agent " + s.id())) << text.substr(0, 300);
  EXPECT_THAT(text, HasSubstr("\nfirst words\nchatty ready\nchatty line 1\nchatty line 2\n"));
  EXPECT_THAT(text, HasSubstr(" bytes of output dropped here (log capped at 1 MiB)\n"));

  v1::StopRequest req;
  req.set_id(s.id());
  v1::StopResponse resp;
  grpc::ClientContext cc;
  ASSERT_TRUE(stub_->Stop(&cc, req, &resp).ok());
  EXPECT_TRUE(absl::EndsWith(resp.server().log_tail(), "last words")) << resp.server().log_tail();
}

TEST_F(AgentLog, AFailedLaunchReportsTheLastWordsOfACappedLog) {
  v1::ServerProcess s;
  grpc::Status st = Launch("dies", &s);
  ASSERT_EQ(st.error_code(), grpc::StatusCode::ABORTED) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("exited 3"));
  EXPECT_TRUE(absl::EndsWith(st.error_message(), "dying words")) << st.error_message();
  EXPECT_LE(DirBytes(logs_), 1 << 20);
}

}  // namespace
}  // namespace testing
}  // namespace rsslab
