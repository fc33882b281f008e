#include "tests/server_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/cpp/runfiles/runfiles.h"

extern char** environ;

namespace rsslab {
namespace testing {
namespace {

std::vector<std::string> MergedEnv(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::pair<std::string, std::string> kv = absl::StrSplit(*e, absl::MaxSplits('=', 1));
    env[kv.first] = kv.second;
  }
  for (const auto& kv : extra) env[kv.first] = kv.second;
  std::vector<std::string> out;
  for (const auto& kv : env) out.push_back(kv.first + "=" + kv.second);
  return out;
}

std::vector<char*> Ptrs(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string TempPath(const char* tag) {
  const char* dir = getenv("TEST_TMPDIR");
  std::string t = absl::StrCat(dir ? dir : "/tmp", "/", tag, "-XXXXXX");
  int fd = mkstemp(t.data());
  if (fd >= 0) close(fd);
  return t;
}

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ServerProcess::Options ServerProcess::TestServer(std::vector<std::string> extra) {
  Options o;
  o.binary = Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
            "--handler=" + Runfile("tests/handlers/test_handler.py")};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  return o;
}

std::string ServerProcess::Runfile(const std::string& path) {
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> rf(
      bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
  if (rf == nullptr) return path;
  return rf->Rlocation("rsslab/" + path);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(const Options& options) {
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->stderr_path_ = TempPath("server-stderr");
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  std::vector<std::string> argv{options.binary};
  argv.insert(argv.end(), options.args.begin(), options.args.end());
  std::vector<std::string> envv = MergedEnv(options.env);
  std::vector<char*> a = Ptrs(argv), e = Ptrs(envv);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    dup2(out[1], 1);
    int err = open(p->stderr_path_.c_str(), O_WRONLY | O_TRUNC | O_CREAT, 0644);
    if (err >= 0) dup2(err, 2);
    execve(a[0], a.data(), e.data());
    fprintf(stderr, "exec %s: %s\n", a[0], strerror(errno));
    _exit(127);
  }
  close(out[1]);
  p->pid_ = pid;
  std::string line;
  absl::Time deadline = absl::Now() + options.ready_timeout;
  bool ready = false;
  while (!ready) {
    int left = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (left <= 0) break;
    pollfd pfd{out[0], POLLIN, 0};
    if (poll(&pfd, 1, left) <= 0) continue;
    char c;
    ssize_t n = read(out[0], &c, 1);
    if (n <= 0) break;  // EOF: the process closed stdout (exited)
    if (c != '\n') {
      line.push_back(c);
      continue;
    }
    if (absl::StartsWith(line, options.ready_prefix)) {
      for (absl::string_view f : absl::StrSplit(line, ' ')) {
        size_t eq = f.find('=');
        if (eq != absl::string_view::npos) {
          p->fields_[std::string(f.substr(0, eq))] = std::string(f.substr(eq + 1));
        }
        if (absl::StartsWith(f, "data=")) p->data_ = std::string(f.substr(5));
        if (absl::StartsWith(f, "control=")) p->control_ = std::string(f.substr(8));
        if (absl::StartsWith(f, "metrics=")) p->metrics_ = std::string(f.substr(8));
      }
      ready = true;
    }
    line.clear();
  }
  // Keep the read end open: closing it would turn a later print (say, from
  // a handler) into SIGPIPE.
  p->stdout_fd_ = out[0];
  if (!ready) {
    int code = p->Wait(absl::Seconds(2));
    if (code == -1) p->Stop(SIGKILL);
    return absl::UnavailableError(absl::StrCat("server did not become ready (exit ", code,
                                               "); stderr:\n", p->Stderr()));
  }
  return p;
}

ServerProcess::~ServerProcess() {
  if (!reaped_ && pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!stderr_path_.empty()) unlink(stderr_path_.c_str());
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

int ServerProcess::Wait(absl::Duration timeout) {
  if (reaped_) return exit_;
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      exit_ = DecodeStatus(status);
      return exit_;
    }
    if (absl::Now() >= deadline) return -1;
    usleep(5000);  // polling a child's exit; not waiting for readiness
  }
}

bool ServerProcess::Running() { return Wait(absl::ZeroDuration()) == -1; }

int ServerProcess::Stop(int sig, absl::Duration timeout) {
  if (reaped_) return exit_;
  kill(pid_, sig);
  int code = Wait(timeout);
  if (code == -1) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
    return -1;
  }
  return code;
}

std::string ServerProcess::Field(const std::string& key) const {
  auto it = fields_.find(key);
  return it == fields_.end() ? "" : it->second;
}

std::string ServerProcess::Stderr() { return ReadAll(stderr_path_); }

ServerProcess::Result ServerProcess::Run(const std::string& binary,
                                         const std::vector<std::string>& args,
                                         const std::map<std::string, std::string>& env,
                                         absl::Duration timeout) {
  Result r;
  std::string out_path = TempPath("run-out"), err_path = TempPath("run-err");
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> envv = MergedEnv(env);
  std::vector<char*> a = Ptrs(argv), e = Ptrs(envv);
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out_path.c_str(), O_WRONLY | O_TRUNC | O_CREAT, 0644);
    int er = open(err_path.c_str(), O_WRONLY | O_TRUNC | O_CREAT, 0644);
    dup2(o, 1);
    dup2(er, 2);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    execve(a[0], a.data(), e.data());
    _exit(127);
  }
  absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) {
      r.exit_code = DecodeStatus(status);
      break;
    }
    if (absl::Now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r.exit_code = -1;
      break;
    }
    usleep(5000);
  }
  r.out = ReadAll(out_path);
  r.err = ReadAll(err_path);
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return r;
}

}  // namespace testing
}  // namespace rsslab
