#include "tests/loadgen_it/loadgen_testing.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {

std::string Tmp(const std::string& name) {
  return absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
}

std::string Loadgen() { return ServerProcess::Runfile("loadgen/rsslab_loadgen"); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<rsslab::v1::Event> Events(const std::string& dir) {
  std::ifstream in(dir + "/events.jsonl");
  std::vector<rsslab::v1::Event> out;
  std::string line;
  while (std::getline(in, line)) {
    rsslab::v1::Event e;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &e).ok()) << line;
    out.push_back(e);
  }
  return out;
}

Child::Child(const std::string& bin, const std::vector<std::string>& args) {
  static int counter = 0;
  const std::string base = Tmp(absl::StrCat("child", getpid(), "_", counter++));
  out_path_ = base + ".out";
  err_path_ = base + ".err";
  pid_ = fork();
  if (pid_ == 0) {
    int fe = open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fe, 2);
    int fo = open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
}

Child::~Child() {
  if (!reaped_) Kill();
}

void Child::Kill() {
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  reaped_ = true;
}

bool Child::WaitForStderr(const std::string& text, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    if (Stderr().find(text) != std::string::npos) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

int Child::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  int st = 0;
  while (absl::Now() < end) {
    struct rusage ru {};
    if (wait4(pid_, &st, WNOHANG, &ru) == pid_) {
      reaped_ = true;
      max_rss_kb_ = ru.ru_maxrss;
      return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return -1;
}

std::unique_ptr<ServerProcess> StartServer(int threads, const std::string& handler) {
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
            absl::StrCat("--threads=", threads)};
  if (!handler.empty()) {
    o.args.push_back("--handler=" + ServerProcess::Runfile("tests/handlers/" + handler));
  }
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

}  // namespace testing
}  // namespace rsslab
