#include "agent/launch.h"

#include "agent/exit_text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/untrusted_text.h"
#include "common/shipped.h"

namespace rsslab {
namespace launch {
namespace {

// [A-Za-z0-9_]{1,64}: a handler's name, never a path.
bool IsHandlerName(absl::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

// Looks for a line matching `match` in the log from *offset on (the start
// of a line), and moves *offset past the complete lines read.
bool FindReadyLineInLog(const std::string& path, const LineMatch& match, off_t* offset,
                        std::string* line) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string text;
  char buf[8192];
  ssize_t n;
  // Bounded: the ready line comes right after start-up; a program that logs
  // megabytes before it is not ready anyway.
  while (text.size() < (4 << 20) &&
         (n = pread(fd, buf, sizeof(buf), *offset + static_cast<off_t>(text.size()))) > 0) {
    text.append(buf, n);
  }
  close(fd);
  size_t start = 0;
  while (true) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string::npos) break;
    absl::string_view l(text.data() + start, nl - start);
    start = nl + 1;
    if (match.Matches(l)) {
      *line = std::string(l);
      *offset += static_cast<off_t>(start);
      return true;
    }
  }
  *offset += static_cast<off_t>(start);
  return false;
}

enum class Waited { kReady, kExited, kTimeout };

// kLogFile: polls the log until the line, the child's exit or the deadline.
Waited AwaitReadyInLog(const LaunchOptions& o, Child& child, off_t offset, absl::Time deadline,
                       std::string* line) {
  while (true) {
    const bool exited = child.AwaitExit(absl::ZeroDuration());
    // Read after the exit check: a line written before the exit is seen.
    if (FindReadyLineInLog(o.log_path, o.ready_match, &offset, line)) return Waited::kReady;
    if (exited) return Waited::kExited;
    if (absl::Now() >= deadline) return Waited::kTimeout;
    child.AwaitExit(absl::Milliseconds(20));
  }
}

// Until ready_host:ready_port accepts a connection, the child exits, or the
// deadline.
Waited AwaitPort(const LaunchOptions& o, Child& child, absl::Time deadline) {
  while (true) {
    const bool exited = child.AwaitExit(absl::ZeroDuration());
    if (!exited && PortAccepts(o.ready_host, o.ready_port, absl::Milliseconds(200))) {
      return Waited::kReady;
    }
    if (exited) return Waited::kExited;
    if (absl::Now() >= deadline) return Waited::kTimeout;
    child.AwaitExit(absl::Milliseconds(50));
  }
}

// The line (if one is awaited), then the port (if one is).
Waited AwaitReady(const LaunchOptions& o, Started& st) {
  const absl::Time deadline = absl::Now() + o.ready_timeout;
  if (!o.ready_match.empty()) {
    Waited w;
    if (o.output == Output::kLogFile) {
      w = AwaitReadyInLog(o, *st.child, static_cast<off_t>(o.log_header.size()), deadline,
                          &st.ready_line);
    } else {
      OutputPump::Result r = st.pump->WaitReady(deadline - absl::Now());
      w = r.state == OutputPump::kReady ? Waited::kReady
          : r.state == OutputPump::kEof ? Waited::kExited
                                        : Waited::kTimeout;
      st.ready_line = r.line;
    }
    if (w != Waited::kReady) return w;
  }
  return o.ready_port > 0 ? AwaitPort(o, *st.child, deadline) : Waited::kReady;
}

// What was awaited, for the timeout's one line.
std::string AwaitedText(const LaunchOptions& o) {
  std::vector<std::string> what;
  if (!o.ready_match.empty()) what.push_back(absl::StrCat(o.ready_match.Describe(), " in its output"));
  if (o.ready_port > 0) {
    what.push_back(absl::StrCat(o.ready_host, ":", o.ready_port, " to accept a connection"));
  }
  return absl::StrJoin(what, ", then ");
}

absl::StatusOr<std::vector<std::string>> BuildArgs(const LaunchOptions& o) {
  using FC = LaunchOptions::FlagCheck;
  if (o.flag_check != FC::kNone) {
    const FlagSource source =
        o.flag_check == FC::kRequest ? FlagSource::kRequest : FlagSource::kOperator;
    for (const auto& [name, value] : o.flags) {
      if (absl::Status s = CheckServerFlag(name, value, source); !s.ok()) return s;
    }
  }
  return LaunchArgs(o);
}

// The log holds all of the program's output (it has ended).
void AwaitLog(const Started& st) {
  if (st.log_writer != nullptr) st.log_writer->Await(kLogDrainTimeout);
}

// The child is gone: kill it if it still runs, reap it, say why with the log.
absl::Status Fail(const LaunchOptions& o, const Started& st, absl::StatusCode code,
                  absl::string_view why) {
  Child& child = *st.child;
  const pid_t pid = st.pid;
  child.Signal(SIGKILL);
  child.AwaitExit(absl::Seconds(30));
  AwaitLog(st);  // whoever reads the log's tail next sees its end
  return absl::Status(code, absl::StrCat(o.name, " (pid ", pid, ") killed: ", why,
                                         o.log_path.empty() ? "" : "; log ", o.log_path));
}

absl::Status ExitedBeforeReady(const LaunchOptions& o, const Started& st) {
  Child& child = *st.child;
  child.AwaitExit(absl::Seconds(30));
  AwaitLog(st);  // its last words are what this message is for
  std::string msg = absl::StrCat(o.name, " (profile ", o.profile->name(),
                                 ") exited before it was ready: ", child.ExitDescription());
  if (!o.log_path.empty()) {
    absl::StrAppend(&msg, "; log ", o.log_path, ", last lines:\n", LogTail(o.log_path));
  }
  return absl::AbortedError(msg);
}

// Opens the log and writes its header; *fd -1 when there is no log.
absl::Status OpenLog(const LaunchOptions& o, int* fd) {
  *fd = -1;
  if (o.log_path.empty()) return absl::OkStatus();
  *fd = open(o.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (*fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create log ", o.log_path, ": ", strerror(errno)));
  }
  if (!o.log_header.empty()) {
    ssize_t ignored = write(*fd, o.log_header.data(), o.log_header.size());
    (void)ignored;
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const LaunchOptions& o) {
  if (o.program.empty()) return absl::InvalidArgumentError("launch: no program");
  if (o.profile == nullptr) return absl::InvalidArgumentError("launch: no profile");
  if (o.output == Output::kLogFile && o.log_path.empty()) {
    return absl::InvalidArgumentError("launch: Output::kLogFile needs a log_path");
  }
  if (o.ready_match.empty() && o.ready_port <= 0) {
    return absl::InvalidArgumentError("launch: neither a ready line nor a ready port to wait for");
  }
  if (o.log_path.empty() && o.forward_stdout_fd < 0) {
    return absl::InvalidArgumentError("launch: no log_path and no forward_stdout_fd");
  }
  if (o.log_max_bytes != 0 &&
      (o.output != Output::kLogFile || o.log_max_bytes < kMinLogCapBytes ||
       o.log_writer_binary.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "launch: log_max_bytes needs Output::kLogFile, a log_writer_binary and at least ",
        kMinLogCapBytes, " bytes"));
  }
  return absl::OkStatus();
}

// kLogFile with a cap: the program's stdout and stderr into a pipe read by
// a log writer (agent/log_cap.h), started first, detached: it outlives the
// launcher as the program does. The header is in the log already.
absl::StatusOr<pid_t> SpawnCapped(const LaunchOptions& o, SpawnOptions so, Child& child,
                                  std::shared_ptr<LogWriterDone>* writer) {
  int out[2], done[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  if (pipe2(done, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  // Its stdout: the end of `done`, seen closed once it exits; stderr: none
  // (a pipe of the launcher's would outlive the launcher's own output).
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnOptions w;
  w.binary = o.log_writer_binary;
  w.args = LogWriterArgs(o.log_path, o.log_max_bytes);
  w.env = profiles::EnvStrings(profiles::CurrentEnviron());  // not the profile's
  w.stdin_fd = out[0];
  w.stdout_fd = done[1];
  w.stderr_fd = devnull;
  w.detach = true;
  absl::StatusOr<pid_t> wpid = child.SpawnDetached(w);
  close(out[0]);
  close(done[1]);
  if (devnull >= 0) close(devnull);
  if (!wpid.ok()) {
    close(out[1]);
    close(done[0]);
    return absl::InternalError(absl::StrCat("cannot start the log writer: ", wpid.status().message()));
  }
  *writer = std::make_shared<LogWriterDone>(done[0]);
  // One pipe for both, as one O_APPEND file was: lines keep their order.
  so.stdout_fd = out[1];
  so.stderr_fd = out[1];
  absl::StatusOr<pid_t> pid = child.Spawn(so);
  close(out[1]);  // the writer sees EOF once the program (and its children) closed theirs
  return pid;
}

// Spawns with stdout into a pipe (kPipe) or the log (kLogFile).
absl::StatusOr<pid_t> SpawnChild(const LaunchOptions& o, const std::vector<std::string>& args,
                                 int log_fd, Child& child, std::unique_ptr<OutputPump>* pump,
                                 std::shared_ptr<LogWriterDone>* writer) {
  SpawnOptions so;
  so.binary = o.program;
  so.args = args;
  so.env = profiles::EnvStrings(LaunchEnv(o));
  so.stderr_fd = log_fd;  // -1: inherited
  so.cpus = o.cpus;
  so.parent_death_signal = o.parent_death_signal;
  if (o.output == Output::kLogFile && o.log_max_bytes > 0) {
    close(log_fd);  // the writer opens it itself
    return SpawnCapped(o, so, child, writer);
  }
  if (o.output == Output::kLogFile) {
    // One O_APPEND description for both: lines never overwrite each other.
    so.stdout_fd = log_fd;
    absl::StatusOr<pid_t> pid = child.Spawn(so);
    close(log_fd);
    return pid;
  }
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    if (log_fd >= 0) close(log_fd);
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  so.stdout_fd = out[1];
  absl::StatusOr<pid_t> pid = child.Spawn(so);
  close(out[1]);
  if (!pid.ok()) {
    close(out[0]);
    if (log_fd >= 0) close(log_fd);
    return pid;
  }
  const bool forward = o.forward_stdout_fd >= 0;
  if (forward && log_fd >= 0) close(log_fd);  // stderr has its copy
  *pump = std::make_unique<OutputPump>(out[0], forward ? o.forward_stdout_fd : log_fd,
                                       /*own_sink=*/!forward, o.ready_match,
                                       /*withhold_ready=*/forward);
  return pid;
}

absl::StatusOr<VerifiedLaunch> VerifyStarted(const LaunchOptions& o, pid_t pid,
                                             const std::string& line) {
  if (o.verify == Verify::kProfileAndControl) {
    return VerifyLaunch(pid, *o.profile, line, o.security);
  }
  absl::StatusOr<profiles::Verification> v = profiles::VerifyProfile(pid, *o.profile);
  if (!v.ok()) return absl::FailedPreconditionError(v.status().message());
  VerifiedLaunch out;
  out.verification = *std::move(v);
  return out;
}

}  // namespace

profiles::Env LaunchEnv(const LaunchOptions& o) {
  return profiles::BuildLaunchEnv(*o.profile, o.base_env);
}

std::vector<std::string> LaunchArgs(const LaunchOptions& o) {
  std::vector<std::string> args = o.fixed_args;
  for (const auto& [name, value] : o.flags) args.push_back(absl::StrCat("--", name, "=", value));
  return args;
}

OwnChild::~OwnChild() {
  if (pid_ > 0 && !exited_.HasBeenNotified()) kill(pid_, SIGKILL);
  if (waiter_.joinable()) waiter_.join();
}

absl::StatusOr<pid_t> OwnChild::SpawnDetached(const SpawnOptions& options) {
  SpawnOptions o = options;
  o.detach = true;
  absl::StatusOr<pid_t> pid = launch::Spawn(o);
  if (pid.ok()) {
    // The middle process exits at once.
    while (waitpid(*pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  return pid;
}

absl::StatusOr<pid_t> OwnChild::Spawn(const SpawnOptions& options) {
  absl::StatusOr<pid_t> pid = launch::Spawn(options);
  if (!pid.ok()) return pid;
  pid_ = *pid;
  waiter_ = std::thread([this] {
    int st = 0;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    wait_status_ = st;
    exited_.Notify();
  });
  return pid;
}

bool OwnChild::AwaitExit(absl::Duration timeout) {
  if (pid_ <= 0) return true;
  return exited_.WaitForNotificationWithTimeout(timeout);
}

void OwnChild::Signal(int sig) {
  // Until the waiter has reaped it the pid is ours (alive or a zombie).
  if (pid_ > 0 && !exited_.HasBeenNotified()) kill(pid_, sig);
}

std::string OwnChild::ExitDescription() {
  return exited_.HasBeenNotified() ? DescribeExit(wait_status_) : "still running";
}

absl::StatusOr<Started> StartVerifiedServer(const LaunchOptions& o) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> args = BuildArgs(o);
  if (!args.ok()) return args.status();
  int log_fd = -1;
  if (absl::Status s = OpenLog(o, &log_fd); !s.ok()) return s;
  Started st;
  st.log_path = o.log_path;
  st.child = o.child != nullptr ? o.child : std::make_shared<OwnChild>();
  absl::StatusOr<pid_t> pid = SpawnChild(o, *args, log_fd, *st.child, &st.pump, &st.log_writer);
  if (!pid.ok()) return pid.status();
  st.pid = *pid;

  const Waited waited = AwaitReady(o, st);
  if (waited == Waited::kExited) {
    absl::Status s = ExitedBeforeReady(o, st);
    if (st.pump != nullptr) st.pump->WaitEof(absl::Seconds(5));
    return s;
  }
  if (waited == Waited::kTimeout) {
    return Fail(o, st, absl::StatusCode::kDeadlineExceeded,
                absl::StrCat("not ready within ", absl::FormatDuration(o.ready_timeout),
                             " (waited for ", AwaitedText(o), ")"));
  }
  absl::StatusOr<VerifiedLaunch> v = VerifyStarted(o, st.pid, st.ready_line);
  if (!v.ok()) return Fail(o, st, v.status().code(), v.status().message());
  st.verified = *std::move(v);
  return st;
}

bool StopStarted(Started& started, absl::Duration grace) {
  started.child->Signal(SIGTERM);
  const bool in_time = started.child->AwaitExit(grace);
  if (!in_time) {
    started.child->Signal(SIGKILL);
    started.child->AwaitExit(absl::InfiniteDuration());
  }
  if (started.pump != nullptr) started.pump->WaitEof(absl::Seconds(5));
  AwaitLog(started);
  return in_time;
}

std::vector<std::string> HandlersIn(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    DIR* dir = opendir(d.c_str());
    if (dir == nullptr) continue;
    while (dirent* e = readdir(dir)) {
      absl::string_view n(e->d_name);
      if (absl::ConsumeSuffix(&n, ".py") && IsHandlerName(n)) out.emplace_back(n);
    }
    closedir(dir);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::StatusOr<std::string> FindHandler(const std::string& name_in,
                                        const std::vector<std::string>& dirs) {
  const std::string name = name_in.empty() ? std::string(kDefaultHandlerName) : name_in;
  if (!IsHandlerName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handler '", Echo(name, 64), "' must be a handler name such as ", kDefaultHandlerName,
        " ([A-Za-z0-9_]+), not a path"));
  }
  for (const std::string& d : dirs) {
    std::string p = absl::StrCat(d, "/", name, ".py");
    if (access(p.c_str(), R_OK) == 0) return p;
  }
  return absl::NotFoundError(absl::StrCat("handler '", name, "' not found (available: ",
                                          absl::StrJoin(HandlersIn(dirs), ", "), ")"));
}

}  // namespace launch
}  // namespace rsslab
