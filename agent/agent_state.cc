#include "agent/agent_state.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "common/files.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"

namespace rsslab {
namespace agent_state {

absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text) {
  const size_t close = text.rfind(')');
  if (close == absl::string_view::npos) {
    return absl::InvalidArgumentError("/proc/PID/stat: no ')' after the command name");
  }
  std::vector<absl::string_view> f =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // f[0] is field 3 (state), so field N is f[N - 3].
  if (f.size() < 20 || f[0].size() != 1) {
    return absl::InvalidArgumentError("/proc/PID/stat: too few fields");
  }
  ProcStat st;
  st.state = f[0][0];
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(f[19]), &st.start_ticks)) {
    return absl::InvalidArgumentError("/proc/PID/stat: field 22 (starttime) is not a number");
  }
  return st;
}

absl::StatusOr<ProcStat> ReadProcStat(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("no process ", pid));
  char buf[1024];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  // ESRCH: it exited between open and read.
  if (n <= 0) return absl::NotFoundError(absl::StrCat("no process ", pid));
  return ParseProcStat(absl::string_view(buf, n));
}

std::string ExePath(pid_t pid) {
  char buf[PATH_MAX];
  ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

std::string WhyNotAlive(const v1::AgentStateServer& rec, const std::string& server_binary) {
  const pid_t pid = rec.server().pid();
  absl::StatusOr<ProcStat> st = ReadProcStat(pid);
  if (!st.ok()) return absl::StrCat("pid ", pid, " is no longer running");
  if (st->start_ticks != rec.start_ticks()) {
    return absl::StrCat("pid ", pid, " is no longer running (the pid now belongs to another "
                        "process, started at tick ", st->start_ticks, ", not ", rec.start_ticks(),
                        ")");
  }
  if (st->state == 'Z') return absl::StrCat("pid ", pid, " has exited (zombie)");
  const std::string exe = ExePath(pid);
  if (exe != server_binary && exe != server_binary + " (deleted)") {
    // Same start time but another program: it exec'd something else, or the
    // agent now runs another server binary. Either way not ours to signal.
    return absl::StrCat("pid ", pid, " runs ", exe.empty() ? "an unreadable executable" : exe,
                        ", not the configured server binary ", server_binary);
  }
  return "";
}

absl::StatusOr<v1::AgentState> Read(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat("no state file ", path));
  }
  absl::StatusOr<std::string> read = ReadFileBounded(path, kStateFileMaxBytes, "state file");
  if (!read.ok()) return absl::InvalidArgumentError(read.status().message());
  const std::string& text = *read;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("state file ", path, " is unreadable: ", why));
  };
  v1::AgentState state;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;  // written by a newer agent
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &state, o);
  if (!parsed.ok()) {
    std::string msg(parsed.message());
    return bad(msg.substr(0, msg.find('\n')));
  }
  for (const v1::AgentStateServer& s : state.servers()) {
    if (s.server().pid() <= 1 || s.start_ticks() == 0 || s.server().id().empty()) {
      return bad(absl::StrCat("record '", s.server().id(), "' has pid ", s.server().pid(),
                              " and start_ticks ", s.start_ticks()));
    }
  }
  return state;
}

absl::Status Write(const std::string& path, const v1::AgentState& state) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.add_whitespace = true;
  std::string text;
  (void)google::protobuf::util::MessageToJsonString(state, &text, o);
  text += "\n";
  // 0600: the state names the servers' command lines and pids.
  return WriteFileAtomically(path, text, 0600);
}

absl::Status PrepareDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("--state_dir=", dir, ": cannot create: ", strerror(errno)));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat("--state_dir=", dir, " is not a directory"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--state_dir=", dir, " belongs to uid ", st.st_uid, ", not to this agent's uid ",
        geteuid(), "; choose another directory"));
  }
  if ((st.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--state_dir=", dir, " is writable by others (whoever writes the state file chooses "
        "which pids the agent signals); chmod go-w it or choose another directory"));
  }
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("--state_dir=", dir, " is not writable"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> LockDir(const std::string& dir) {
  const std::string path = dir + "/agent.lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    std::string holder = n > 0 ? std::string(absl::StripAsciiWhitespace(buf)) : "?";
    return absl::FailedPreconditionError(absl::StrCat(
        "--state_dir=", dir, " is in use by another rsslab_agent (pid ", holder,
        "); stop it or give this one its own --state_dir"));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) == 0) {
    ssize_t ignored = pwrite(fd, pid.data(), pid.size(), 0);
    (void)ignored;
  }
  return fd;
}

}  // namespace agent_state
}  // namespace rsslab
