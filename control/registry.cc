#include "control/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/echo.h"
#include "common/pid.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace registry {
namespace {

constexpr absl::string_view kPrefix = "rsslab-control-";
constexpr absl::string_view kSuffix = ".addr";
constexpr int kMaxLines = 16;

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-'; }

// The pid a file name carries ("rsslab-control-1234.addr" -> 1234), else 0.
int PidOfName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix) || !absl::ConsumeSuffix(&name, kSuffix)) return 0;
  absl::StatusOr<int> pid = ParsePid(name, "file name", kPidLimit);
  return pid.ok() ? *pid : 0;
}

absl::Status CheckAddress(absl::string_view v) {
  size_t colon = v.rfind(':');
  int port = 0;
  if (v.empty() || colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(v.substr(colon + 1), &port) || port < 1 || port > 65535 ||
      !std::all_of(v.begin(), v.end(), [](char c) { return absl::ascii_isgraph(c); })) {
    return absl::InvalidArgumentError(
        absl::StrCat("the first line is not HOST:PORT (", Echo(v, 64), ")"));
  }
  return absl::OkStatus();
}

// The uid that owns /proc/PID (the process's), or -1.
int ProcessUid(int pid) {
  struct stat st;
  if (stat(absl::StrCat("/proc/", pid).c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_uid);
}

struct FileRead {
  std::string text;
  ino_t inode = 0;
};

absl::StatusOr<FileRead> ReadSmallFile(const std::string& path, int uid) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InvalidArgumentError(errno == ELOOP ? "a symlink" : strerror(errno));
  }
  struct stat st;
  std::string why;
  FileRead r;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
  } else if (uid >= 0 && static_cast<int>(st.st_uid) != uid) {
    close(fd);
    return absl::PermissionDeniedError(absl::StrCat("owned by uid ", st.st_uid, ", not ", uid));
  } else if (st.st_size > static_cast<off_t>(kMaxEntryBytes)) {
    why = absl::StrCat("larger than ", kMaxEntryBytes, " bytes");
  } else {
    char buf[kMaxEntryBytes + 1];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 || static_cast<size_t>(n) > kMaxEntryBytes) {
      why = n < 0 ? "unreadable" : absl::StrCat("larger than ", kMaxEntryBytes, " bytes");
    } else {
      r.text.assign(buf, static_cast<size_t>(n));
      r.inode = st.st_ino;
    }
  }
  close(fd);
  if (!why.empty()) return absl::InvalidArgumentError(why);
  return r;
}

bool ProcessRuns(int pid) {
  struct stat st;
  return stat(absl::StrCat("/proc/", pid).c_str(), &st) == 0;
}

// Removes a stale entry only if the file is still the one read (a process
// that reused the pid may have written a new one since).
bool RemoveIfSame(const std::string& path, ino_t inode) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || st.st_ino != inode) return false;
  return unlink(path.c_str()) == 0;
}

}  // namespace

std::string EntryPath(absl::string_view dir, int pid) {
  std::string d(dir);
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return absl::StrCat(d, "/", kPrefix, pid, kSuffix);
}

absl::Status CheckServiceName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxServiceName ||
      !std::all_of(name.begin(), name.end(), IsNameChar)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "service name '", Echo(name, 80), "' must be 1 to ", kMaxServiceName,
        " characters of A-Z a-z 0-9 . _ -"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Entry> ParseEntry(absl::string_view text, int file_pid) {
  if (text.size() > kMaxEntryBytes) {
    return absl::InvalidArgumentError(absl::StrCat("larger than ", kMaxEntryBytes, " bytes"));
  }
  if (!absl::ConsumeSuffix(&text, "\n")) return absl::InvalidArgumentError("no final newline");
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.size() > kMaxLines) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxLines, " lines"));
  }
  Entry e;
  e.address = std::string(lines[0]);
  if (absl::Status s = CheckAddress(lines[0]); !s.ok()) return s;
  bool has_pid = false, has_start = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view key, value = lines[i];
    size_t eq = value.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", i + 1, " is not key=value (", Echo(value, 64), ")"));
    }
    key = value.substr(0, eq);
    value.remove_prefix(eq + 1);
    if (key == "service") {
      if (absl::Status s = CheckServiceName(value); !s.ok()) return s;
      e.service = std::string(value);
    } else if (key == "pid") {
      absl::StatusOr<int> pid = ParsePid(value, "pid=", kPidLimit);
      if (!pid.ok()) return pid.status();
      e.pid = *pid;
      has_pid = true;
    } else if (key == "start") {
      if (value.empty() || !std::all_of(value.begin(), value.end(), absl::ascii_isdigit) ||
          !absl::SimpleAtoi(value, &e.start_ticks)) {
        return absl::InvalidArgumentError(
            absl::StrCat("start=", Echo(value, 32), " is not a number of clock ticks"));
      }
      has_start = true;
    }  // Other keys: a newer package's, ignored.
  }
  if (e.service.empty() || !has_pid || !has_start) {
    return absl::InvalidArgumentError(
        "no service=, pid= or start= line (written by an older rsslab package?)");
  }
  if (file_pid != 0 && e.pid != file_pid) {
    return absl::InvalidArgumentError(
        absl::StrCat("pid=", e.pid, " inside, but the file name says ", file_pid));
  }
  return e;
}

std::string StaleReason(const Entry& e) {
  absl::StatusOr<std::string> stat = procfs::ReadProcFile(e.pid, "stat");
  procfs::ThreadView v;
  if (!stat.ok() || !procfs::ParseThreadStat(absl::StripAsciiWhitespace(*stat), &v)) {
    return absl::StrCat("stale: pid ", e.pid, " is gone");
  }
  if (v.state == 'Z' || v.state == 'X') return absl::StrCat("stale: pid ", e.pid, " has exited");
  if (v.start_ticks != e.start_ticks) {
    return absl::StrCat("stale: pid ", e.pid, " started at tick ", v.start_ticks, ", not ",
                        e.start_ticks, " (a reused pid)");
  }
  return "";
}

namespace {

// One file read, parsed, checked live and owned by its process's user.
// NotFound: no file; FailedPrecondition: stale; InvalidArgument: anything
// else; PermissionDenied: another user's. `*parsed` gets the entry whenever it parsed; `*inode` the file's.
absl::StatusOr<Entry> Load(const std::string& path, int file_pid, int uid, Entry* parsed,
                           ino_t* inode) {
  if (uid < 0 && geteuid() != 0) uid = static_cast<int>(geteuid());
  absl::StatusOr<FileRead> f = ReadSmallFile(path, uid);
  if (!f.ok()) return f.status();
  if (inode != nullptr) *inode = f->inode;
  absl::StatusOr<Entry> e = ParseEntry(f->text, file_pid);
  if (!e.ok()) return e.status();
  e->path = path;
  if (parsed != nullptr) *parsed = *e;
  if (std::string why = StaleReason(*e); !why.empty()) return absl::FailedPreconditionError(why);
  // Root reads anyone's entries, but only the process's own user could
  // have written a true one.
  struct stat st;
  const int owner = lstat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_uid) : -1;
  if (ProcessUid(e->pid) != owner) {
    return absl::PermissionDeniedError(
        absl::StrCat("owned by uid ", owner, ", not by pid ", e->pid, "'s user"));
  }
  return e;
}

}  // namespace

absl::StatusOr<Entry> ReadEntry(const std::string& path, int file_pid, int uid) {
  return Load(path, file_pid, uid, nullptr, nullptr);
}

std::vector<std::string> Dirs() {
  std::vector<std::string> dirs;
  const char* x = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  if (x != nullptr && *x != '\0' && stat(x, &st) == 0 && S_ISDIR(st.st_mode)) dirs.push_back(x);
  if (dirs.empty() || dirs[0] != "/tmp") dirs.push_back("/tmp");
  return dirs;
}

Listing ListService(absl::string_view service, const std::vector<std::string>& dirs, bool clean) {
  Listing out;
  std::map<int, Entry> by_pid;
  for (const std::string& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    int files = 0;
    while (struct dirent* de = readdir(d)) {
      const int file_pid = PidOfName(de->d_name);
      if (file_pid == 0) continue;
      const std::string path = EntryPath(dir, file_pid);
      if (++files > kMaxFilesPerDir) {
        out.ignored.push_back({dir, absl::StrCat("more than ", kMaxFilesPerDir,
                                                 " entries: the rest not read"), false});
        break;
      }
      Entry parsed;
      ino_t inode = 0;
      absl::StatusOr<Entry> e = Load(path, file_pid, -1, &parsed, &inode);
      if (absl::IsNotFound(e.status())) continue;  // gone since the scan
      if (absl::IsFailedPrecondition(e.status())) {
        // Any service's stale entry of ours is cleaned; only this service's is said.
        const bool removed = clean && RemoveIfSame(path, inode);
        if (parsed.service == service) out.ignored.push_back({path, std::string(e.status().message()), removed});
        continue;
      }
      if (absl::IsInvalidArgument(e.status()) && !ProcessRuns(file_pid)) {
        // Malformed and its process gone (an older package's, a torn
        // write): stale whoever's it was, so cleaned and not said.
        if (clean) RemoveIfSame(path, inode);
        continue;
      }
      if (!e.ok()) {
        // Another user's files are theirs, unless they claim this service;
        // a malformed one of a live process cannot say whose it is: said.
        const bool foreign = absl::IsPermissionDenied(e.status());
        if ((!foreign && parsed.service.empty()) || parsed.service == service) {
          out.ignored.push_back({path, std::string(e.status().message()), false});
        }
        continue;
      }
      if (e->service != service || by_pid.count(e->pid) > 0) continue;
      by_pid.emplace(e->pid, *e);
    }
    closedir(d);
  }
  for (auto& [pid, e] : by_pid) {
    if (out.workers.size() >= static_cast<size_t>(kMaxWorkers)) {
      out.ignored.push_back({e.path, absl::StrCat("more than ", kMaxWorkers,
                                                  " workers: the rest not used"), false});
      break;
    }
    out.workers.push_back(std::move(e));
  }
  return out;
}

absl::StatusOr<Entry> FindPid(int pid, const std::vector<std::string>& dirs) {
  std::vector<std::string> notes;
  for (const std::string& dir : dirs) {
    const std::string path = EntryPath(dir, pid);
    absl::StatusOr<Entry> e = ReadEntry(path, pid);
    if (e.ok()) return e;
    if (!absl::IsNotFound(e.status())) notes.push_back(absl::StrCat(path, ": ", e.status().message()));
  }
  return absl::NotFoundError(absl::StrCat(
      "pid ", pid, " has no live Control entry",
      notes.empty() ? absl::StrCat(" in ", absl::StrJoin(dirs, " or "))
                    : absl::StrCat(" (", absl::StrJoin(notes, "; "), ")")));
}

absl::StatusOr<ControlSpec> ParseControlSpec(absl::string_view v) {
  ControlSpec spec;
  if (absl::ConsumePrefix(&v, "all:")) {
    if (absl::Status s = CheckServiceName(v); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--control=all:NAME: ", s.message()));
    }
    spec.kind = ControlSpec::Kind::kService;
    spec.service = std::string(v);
    return spec;
  }
  if (absl::ConsumePrefix(&v, "pid:")) {
    absl::StatusOr<int> pid = ParsePid(v, "--control=pid:PID");
    if (!pid.ok()) return pid.status();
    spec.kind = ControlSpec::Kind::kPid;
    spec.pid = *pid;
    return spec;
  }
  spec.address = std::string(v);
  return spec;
}

absl::StatusOr<std::vector<Entry>> Resolve(const ControlSpec& spec,
                                           std::vector<Ignored>* ignored) {
  if (spec.kind == ControlSpec::Kind::kAddress) {
    Entry e;
    e.address = spec.address;
    return std::vector<Entry>{e};
  }
  const std::vector<std::string> dirs = Dirs();
  if (spec.kind == ControlSpec::Kind::kPid) {
    absl::StatusOr<Entry> e = FindPid(spec.pid, dirs);
    if (!e.ok()) return e.status();
    return std::vector<Entry>{*e};
  }
  Listing l = ListService(spec.service, dirs, /*clean=*/true);
  if (ignored != nullptr) *ignored = l.ignored;
  if (l.workers.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no live worker of service '", spec.service, "' registered in ", absl::StrJoin(dirs, " or "),
        l.ignored.empty() ? "" : absl::StrCat(" (", l.ignored.size(), " entries ignored)")));
  }
  return std::move(l.workers);
}

std::string WorkerName(const Entry& e) {
  return e.pid == 0 ? e.address : absl::StrCat("pid ", e.pid, " at ", e.address);
}

}  // namespace registry
}  // namespace rsslab
