#include "agent/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"

namespace rsslab {
namespace launch {
namespace {

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk must not stop the copy loop
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const SpawnOptions& o) {
  // Everything the child needs is built before fork: after fork only
  // async-signal-safe calls (the parent may have other threads holding
  // malloc's locks).
  std::vector<std::string> argv_s{o.binary};
  argv_s.insert(argv_s.end(), o.args.begin(), o.args.end());
  std::vector<char*> argv, envp;
  for (std::string& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = o.env;
  for (std::string& s : env_s) envp.push_back(s.data());
  envp.push_back(nullptr);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    if (devnull >= 0) close(devnull);
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : o.cpus) {
    if (c < 0 || c >= CPU_SETSIZE) {
      close(err_pipe[0]);
      close(err_pipe[1]);
      if (devnull >= 0) close(devnull);
      return absl::InvalidArgumentError(absl::StrCat("CPU ", c, " out of range"));
    }
    CPU_SET(c, &cpus);
  }
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(err_pipe[0]);
    close(err_pipe[1]);
    if (devnull >= 0) close(devnull);
    return absl::InternalError(absl::StrCat("fork: ", strerror(e)));
  }
  if (pid == 0) {
    if (o.detach) {
      pid_t grandchild = fork();
      if (grandchild < 0) {
        int e = errno;
        ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
        (void)ignored;
        _exit(127);
      }
      if (grandchild > 0) _exit(0);
      setsid();  // a session of its own: no terminal's signals reach it
    } else if (o.new_process_group) {
      setpgid(0, 0);
    }
    if (!o.cpus.empty() && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      int e = errno;
      ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
      (void)ignored;
      _exit(127);
    }
    if (o.parent_death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, o.parent_death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before prctl
    }
    // Undo any blocking the parent did for sigwait; exec keeps the mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) {
      int e = errno;
      ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
      (void)ignored;
      _exit(127);
    }
    int in = o.stdin_fd >= 0 ? o.stdin_fd : devnull;
    if (in >= 0) dup2(in, 0);
    if (o.stdout_fd >= 0) dup2(o.stdout_fd, 1);
    if (o.stderr_fd >= 0) dup2(o.stderr_fd, 2);
    execve(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(err_pipe[1], &e, sizeof(e));
    (void)ignored;
    _exit(127);
  }
  close(err_pipe[1]);
  if (devnull >= 0) close(devnull);
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(err_pipe[0], &child_errno, sizeof(child_errno));
  } while (n < 0 && errno == EINTR);
  close(err_pipe[0]);
  if (n == sizeof(child_errno)) {
    // The caller's reaper (or its waitpid) collects the dead child.
    return absl::FailedPreconditionError(
        absl::StrCat("cannot execute ", o.binary, ": ", strerror(child_errno)));
  }
  return pid;
}

OutputPump::OutputPump(int read_fd, int sink_fd, bool own_sink, LineMatch ready,
                       bool withhold_ready)
    : read_fd_(read_fd),
      sink_fd_(sink_fd),
      own_sink_(own_sink),
      ready_match_(std::move(ready)),
      withhold_(withhold_ready) {
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Run(); });
}

OutputPump::~OutputPump() {
  if (wake_[1] >= 0) {
    char c = 1;
    ssize_t ignored = write(wake_[1], &c, 1);
    (void)ignored;
  }
  thread_.join();
  close(read_fd_);
  if (own_sink_ && sink_fd_ >= 0) close(sink_fd_);
  if (wake_[0] >= 0) close(wake_[0]);
  if (wake_[1] >= 0) close(wake_[1]);
}

void OutputPump::Run() {
  std::string line;
  // Nothing to look for: only copy.
  bool seen_ready = ready_match_.empty();
  bool long_line = false;  // the current line's start was already copied
  constexpr size_t kMaxReadyLine = 64 << 10;
  char buf[4096];
  while (true) {
    pollfd fds[2] = {{read_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int r = poll(fds, wake_[0] >= 0 ? 2 : 1, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (fds[1].revents & POLLIN)) break;
    ssize_t n = read(read_fd_, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    // Scan for the ready line until it has been seen; afterwards just copy.
    const char* p = buf;
    const char* end = buf + n;
    while (p < end) {
      if (seen_ready) {
        if (sink_fd_ >= 0) WriteAll(sink_fd_, p, end - p);
        break;
      }
      const char* nl = static_cast<const char*>(memchr(p, '\n', end - p));
      if (nl == nullptr) {
        line.append(p, end - p);
        // Bounded: a line this long is copied on and never taken for ready.
        if (line.size() > kMaxReadyLine) {
          if (sink_fd_ >= 0) WriteAll(sink_fd_, line.data(), line.size());
          line.clear();
          long_line = true;
        }
        break;
      }
      line.append(p, nl - p);
      const bool is_ready = !long_line && ready_match_.Matches(line);
      long_line = false;
      if (!(is_ready && withhold_) && sink_fd_ >= 0) {
        WriteAll(sink_fd_, line.data(), line.size());
        WriteAll(sink_fd_, "\n", 1);
      }
      if (is_ready) {
        seen_ready = true;
        absl::MutexLock l(&mu_);
        ready_ = true;
        line_ = line;
      }
      line.clear();
      p = nl + 1;
    }
  }
  if (!line.empty() && sink_fd_ >= 0) WriteAll(sink_fd_, line.data(), line.size());
  absl::MutexLock l(&mu_);
  eof_ = true;
}

OutputPump::Result OutputPump::WaitReady(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ready_ || eof_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (ready_) return {kReady, line_};
  if (eof_) return {kEof, ""};
  return {kTimeout, ""};
}

bool OutputPump::WaitEof(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&eof_), timeout);
}

absl::StatusOr<VerifiedLaunch> VerifyLaunch(pid_t pid, const v1::Profile& profile,
                                            absl::string_view ready_line,
                                            const Security* security,
                                            absl::Duration rpc_timeout) {
  absl::StatusOr<ReadyLine> ready = ParseReadyLine(ready_line);
  if (!ready.ok()) return absl::InternalError(ready.status().message());
  absl::StatusOr<profiles::Verification> v = profiles::VerifyProfile(pid, profile);
  if (!v.ok()) return absl::FailedPreconditionError(v.status().message());
  absl::StatusOr<std::string> reported =
      ReportedAllocator(ready->control_address, rpc_timeout, security);
  if (!reported.ok()) return absl::UnavailableError(reported.status().message());
  absl::Status cross = profiles::CheckReportedAllocator(profile, *reported);
  if (!cross.ok()) return absl::FailedPreconditionError(cross.message());
  return VerifiedLaunch{*std::move(ready), *std::move(v)};
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return absl::StrCat("killed by ",
                        abbrev ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", WTERMSIG(status)),
                        WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return absl::StrCat("wait status ", status);
}

std::string LogTail(const std::string& path, int max_lines) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  off_t size = lseek(fd, 0, SEEK_END);
  off_t start = size > 8192 ? size - 8192 : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  ssize_t n = pread(fd, text.data(), text.size(), start);
  close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // a partial line
  size_t from = lines.size() > static_cast<size_t>(max_lines) ? lines.size() - max_lines : 0;
  return absl::StrJoin(lines.begin() + from, lines.end(), "\n");
}

absl::StatusOr<std::string> ReportedAllocator(const std::string& control_address,
                                              absl::Duration timeout, const Security* security) {
  auto channel = security != nullptr
                     ? security->Channel(control_address)
                     : grpc::CreateChannel(control_address, grpc::InsecureChannelCredentials());
  auto stub = rsslab::v1::Control::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  rsslab::v1::SnapshotRequest req;
  rsslab::v1::Snapshot snap;
  grpc::Status s = stub->GetSnapshot(&ctx, req, &snap);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("GetSnapshot from ", control_address, ": ",
                                               s.error_message()));
  }
  return snap.allocator();
}

}  // namespace launch
}  // namespace rsslab
