#include "registry/registry.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/untrusted_text.h"
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
  int uid = -1;     // the file's owner, when known
  std::string bad;  // why it was not read, or ""
};

// Opened without following a symlink, and not blocking on a FIFO. What
// could not be read still says its owner when it can, for CheckTrusted.
absl::StatusOr<FileRead> ReadSmallFile(const std::string& path) {
  FileRead r;
  struct stat st;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    if (lstat(path.c_str(), &st) == 0) r.uid = static_cast<int>(st.st_uid);
    r.bad = err == ELOOP ? "a symlink" : strerror(err);
    return r;
  }
  if (fstat(fd, &st) != 0) {
    r.bad = "unreadable";
  } else if (r.uid = static_cast<int>(st.st_uid); !S_ISREG(st.st_mode)) {
    r.bad = "not a regular file";
  } else if (st.st_size > static_cast<off_t>(kMaxEntryBytes)) {
    r.bad = absl::StrCat("larger than ", kMaxEntryBytes, " bytes");
  } else {
    char buf[kMaxEntryBytes + 1];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 || static_cast<size_t>(n) > kMaxEntryBytes) {
      r.bad = n < 0 ? "unreadable" : absl::StrCat("larger than ", kMaxEntryBytes, " bytes");
    } else {
      r.text.assign(buf, static_cast<size_t>(n));
      r.inode = st.st_ino;
    }
  }
  close(fd);
  return r;
}

// "uid 1001 (alice)" and the --as_user= value naming it ("alice", or the
// uid when it has no name).
std::pair<std::string, std::string> UserText(int uid) {
  struct passwd pw, *found = nullptr;
  char buf[4096];
  if (getpwuid_r(static_cast<uid_t>(uid), &pw, buf, sizeof(buf), &found) == 0 &&
      found != nullptr && found->pw_name != nullptr && *found->pw_name != '\0') {
    const std::string name = Echo(found->pw_name, kMaxUserName);
    return {absl::StrCat("uid ", uid, " (", name, ")"), name};
  }
  return {absl::StrCat("uid ", uid), absl::StrCat(uid)};
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


// An IP address as /proc/net/tcp{,6} print it: the 32-bit words of the
// address in memory order (each printed as a host-order hex number).
struct IpWords {
  bool v6 = false;
  uint32_t w[4] = {0, 0, 0, 0};  // v4: w[0] only
  bool operator==(const IpWords& o) const {
    return v6 == o.v6 && memcmp(w, o.w, sizeof(w)) == 0;
  }
};

IpWords V4(uint32_t s_addr) {
  IpWords a;
  a.w[0] = s_addr;
  return a;
}

// ::ffff:a.b.c.d as a v4 address, else itself.
IpWords Unmapped(const IpWords& a) {
  if (a.v6 && a.w[0] == 0 && a.w[1] == 0 && a.w[2] == htonl(0xffff)) return V4(a.w[3]);
  return a;
}

// The addresses a connection to `host` may reach (a name other than
// localhost is not resolved: serve() writes numbers). A connection to
// 0.0.0.0 or :: reaches the loopback address.
absl::StatusOr<std::vector<IpWords>> Targets(absl::string_view host) {
  if (host == "localhost") return std::vector<IpWords>{V4(htonl(INADDR_LOOPBACK)), [] {
    IpWords a;
    a.v6 = true;
    memcpy(a.w, &in6addr_loopback, sizeof(a.w));
    return a;
  }()};
  std::string h(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  in_addr a4;
  in6_addr a6;
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) {
    if (a4.s_addr == htonl(INADDR_ANY)) a4.s_addr = htonl(INADDR_LOOPBACK);
    return std::vector<IpWords>{V4(a4.s_addr)};
  }
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) {
    if (memcmp(&a6, &in6addr_any, sizeof(a6)) == 0) a6 = in6addr_loopback;
    IpWords a;
    a.v6 = true;
    memcpy(a.w, &a6, sizeof(a.w));
    return std::vector<IpWords>{Unmapped(a)};
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "'", Echo(host, 64), "' is not a numeric address: whose socket it is cannot be checked"));
}

bool IsAny(const IpWords& a) { return a.w[0] == 0 && a.w[1] == 0 && a.w[2] == 0 && a.w[3] == 0; }

// Whether a listener on `local` (a 0.0.0.0 or :: one included; a :: one
// serves v4 too unless IPV6_V6ONLY, which /proc does not show: counted)
// takes connections to `target`.
bool Serves(const IpWords& local, const IpWords& target) {
  if (IsAny(local)) return local.v6 || !target.v6;
  return Unmapped(local) == target;
}

struct Listener {
  int uid = -1;
  uint64_t inode = 0;
};

// The LISTEN (0A) rows of /proc/self/net/`file` on `port` that take
// connections to one of `targets`.
void ListenersOn(const char* file, bool v6, int port, const std::vector<IpWords>& targets,
                 std::vector<Listener>* out) {
  std::ifstream in(absl::StrCat("/proc/self/net/", file));
  std::string line;
  for (int n = 0; n < kMaxSocketLines && std::getline(in, line); ++n) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() < 10 || f[3] != "0A") continue;
    absl::string_view local = f[1];
    const size_t colon = local.find(':');
    const size_t hex_len = v6 ? 32 : 8;
    uint32_t p = 0;
    if (colon != hex_len || !absl::SimpleHexAtoi(local.substr(colon + 1), &p) ||
        static_cast<int>(p) != port) {
      continue;
    }
    IpWords a;
    a.v6 = v6;
    bool ok = true;
    for (size_t i = 0; i < hex_len / 8; ++i) {
      ok = ok && absl::SimpleHexAtoi(local.substr(i * 8, 8), &a.w[i]);
    }
    Listener l;
    if (!ok || !absl::SimpleAtoi(f[7], &l.uid) || !absl::SimpleAtoi(f[9], &l.inode)) continue;
    if (std::any_of(targets.begin(), targets.end(),
                    [&](const IpWords& t) { return Serves(a, t); })) {
      out->push_back(l);
    }
  }
}

// The socket inodes among /proc/PID/fd; false when that cannot be read
// (another user's process, for a reader that is not root).
bool SocketInodes(int pid, std::set<uint64_t>* inodes) {
  const std::string dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  int n = 0;
  while (struct dirent* de = readdir(d)) {
    if (de->d_name[0] == '.' || ++n > kMaxProcessFds) continue;
    char target[64];
    ssize_t len = readlink(absl::StrCat(dir, "/", de->d_name).c_str(), target, sizeof(target) - 1);
    if (len <= 0) continue;
    absl::string_view t(target, static_cast<size_t>(len));
    uint64_t inode = 0;
    if (absl::ConsumePrefix(&t, "socket:[") && absl::ConsumeSuffix(&t, "]") &&
        absl::SimpleAtoi(t, &inode)) {
      inodes->insert(inode);
    }
  }
  closedir(d);
  return true;
}

}  // namespace

absl::Status CheckListener(const Entry& e) {
  const size_t colon = e.address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(e.address.substr(colon + 1), &port)) {
    return absl::PermissionDeniedError(absl::StrCat(Echo(e.address, 64), " is not HOST:PORT"));
  }
  const std::string where = absl::StrCat("pid ", e.pid, "'s address ", Echo(e.address, 64));
  absl::StatusOr<std::vector<IpWords>> targets = Targets(e.address.substr(0, colon));
  if (!targets.ok()) {
    return absl::PermissionDeniedError(absl::StrCat(
        where, ": ", targets.status().message(), "; nothing sent (name it with --control=",
        Echo(e.address, 64), " to call it anyway)"));
  }
  std::vector<Listener> found;
  ListenersOn("tcp", false, port, *targets, &found);
  ListenersOn("tcp6", true, port, *targets, &found);
  if (found.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        where, ": no socket listens there in this network namespace (closed, or not local), so "
        "whose it is cannot be checked; nothing sent (name it with --control=",
        Echo(e.address, 64), " to call it anyway)"));
  }
  for (const Listener& l : found) {
    if (l.uid != e.uid) {
      return absl::PermissionDeniedError(absl::StrCat(
          where, " is listened on by ", UserText(l.uid).first, ", not by the entry's ",
          UserText(e.uid).first, ": the port was taken over; nothing sent"));
    }
  }
  std::set<uint64_t> inodes;
  if (SocketInodes(e.pid, &inodes) &&
      std::none_of(found.begin(), found.end(),
                   [&](const Listener& l) { return inodes.count(l.inode) > 0; })) {
    return absl::PermissionDeniedError(absl::StrCat(
        where, " is listened on by another process (socket inode ", found[0].inode,
        ", not one of pid ", e.pid, "'s): the port was taken over; nothing sent"));
  }
  return absl::OkStatus();
}

namespace {
}  // namespace

Trust Trust::Self() { return Trust{{static_cast<int>(geteuid())}}; }

bool Trust::Has(int uid) const {
  return uid >= 0 && std::find(uids.begin(), uids.end(), uid) != uids.end();
}

absl::StatusOr<Trust> TrustUsers(const std::vector<std::string>& users) {
  Trust t = Trust::Self();
  if (users.size() > static_cast<size_t>(kMaxTrustedUsers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--as_user: more than ", kMaxTrustedUsers, " users"));
  }
  for (const std::string& u : users) {
    if (u.empty() || u.size() > kMaxUserName) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--as_user: '", Echo(u, kMaxUserName), "' is not a user name or uid (1 to ",
          kMaxUserName, " characters)"));
    }
    int uid = -1;
    if (std::all_of(u.begin(), u.end(), absl::ascii_isdigit)) {
      uint32_t v = 0;
      // (uid_t)-1 is no user: chown's "unchanged".
      if (!absl::SimpleAtoi(u, &v) || v >= 0x7fffffffu) {
        return absl::InvalidArgumentError(
            absl::StrCat("--as_user: uid ", Echo(u, kMaxUserName), " is out of range"));
      }
      uid = static_cast<int>(v);
    } else {
      struct passwd pw, *found = nullptr;
      char buf[4096];
      if (getpwnam_r(u.c_str(), &pw, buf, sizeof(buf), &found) != 0 || found == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("--as_user: no user named '", Echo(u, kMaxUserName), "'"));
      }
      uid = static_cast<int>(found->pw_uid);
    }
    if (!t.Has(uid)) t.uids.push_back(uid);
  }
  return t;
}

absl::Status CheckTrusted(const Trust& trust, int pid, int file_uid, int process_uid) {
  if (file_uid < 0) {
    return absl::PermissionDeniedError(absl::StrCat("pid ", pid, "'s entry has no known owner"));
  }
  const bool file_ok = trust.Has(file_uid);
  if (!file_ok || (process_uid >= 0 && !trust.Has(process_uid))) {
    auto [who, flag] = UserText(file_ok ? process_uid : file_uid);
    return absl::PermissionDeniedError(absl::StrCat(
        "pid ", pid, file_ok ? " is" : "'s entry is", " owned by ", who,
        ", not trusted; pass --as_user=", flag, " to trust it"));
  }
  if (process_uid >= 0 && process_uid != file_uid) {
    // Only the process's own user writes a true entry of it.
    return absl::PermissionDeniedError(absl::StrCat("pid ", pid, " runs as uid ", process_uid,
                                                    ", but its entry is owned by uid ", file_uid));
  }
  return absl::OkStatus();
}

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
    } else if (key == "metrics") {
      // The package's own /metrics (serve(metrics=...)), for an exporter's
      // service discovery.
      if (absl::Status st = CheckAddress(value); !st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("metrics= ", Echo(value, 64),
                                                       " is not HOST:PORT"));
      }
      e.metrics_address = std::string(value);
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

// One file read, parsed, trusted and checked live. NotFound: no file;
// FailedPrecondition: stale; PermissionDenied: not trusted (CheckTrusted);
// InvalidArgument: anything else. `*parsed` gets the entry whenever it
// parsed; `*inode` the file's.
absl::StatusOr<Entry> Load(const std::string& path, int file_pid, const Trust& trust,
                           Entry* parsed, ino_t* inode) {
  absl::StatusOr<FileRead> f = ReadSmallFile(path);
  if (!f.ok()) return f.status();
  if (!f->bad.empty()) {
    // Whose it is decides whether that is worth a word (and a removal).
    if (f->uid >= 0) {
      if (absl::Status t = CheckTrusted(trust, file_pid, f->uid, -1); !t.ok()) return t;
    }
    return absl::InvalidArgumentError(f->bad);
  }
  if (inode != nullptr) *inode = f->inode;
  absl::StatusOr<Entry> e = ParseEntry(f->text, file_pid);
  // An untrusted user's file is not judged, nor removed, whatever it holds.
  if (absl::Status t = CheckTrusted(trust, file_pid, f->uid, -1); !t.ok()) {
    if (e.ok() && parsed != nullptr) *parsed = *e;
    return t;
  }
  if (!e.ok()) return e.status();
  e->path = path;
  if (parsed != nullptr) *parsed = *e;
  if (std::string why = StaleReason(*e); !why.empty()) return absl::FailedPreconditionError(why);
  // After the start time matched: the uid of that very process (had it
  // exited since, a reuser of the pid would have to be trusted as well).
  if (absl::Status t = CheckTrusted(trust, e->pid, f->uid, ProcessUid(e->pid)); !t.ok()) return t;
  e->uid = f->uid;
  return e;
}

}  // namespace

absl::StatusOr<Entry> ReadEntry(const std::string& path, int file_pid, const Trust& trust) {
  return Load(path, file_pid, trust, nullptr, nullptr);
}

std::vector<std::string> Dirs() {
  std::vector<std::string> dirs;
  const char* x = getenv("XDG_RUNTIME_DIR");
  struct stat st;
  if (x != nullptr && *x != '\0' && stat(x, &st) == 0 && S_ISDIR(st.st_mode)) dirs.push_back(x);
  if (dirs.empty() || dirs[0] != "/tmp") dirs.push_back("/tmp");
  return dirs;
}

namespace {

// ListService, or every service's workers when `service` is empty.
Listing ListMatching(absl::string_view service, const std::vector<std::string>& dirs,
                     const Trust& trust, bool clean) {
  const auto named = [service](const std::string& s) { return service.empty() || s == service; };
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
      absl::StatusOr<Entry> e = Load(path, file_pid, trust, &parsed, &inode);
      if (absl::IsNotFound(e.status())) continue;  // gone since the scan
      if (absl::IsFailedPrecondition(e.status())) {
        // Any service's stale entry of a trusted user is cleaned; only this
        // service's is said.
        const bool removed = clean && RemoveIfSame(path, inode);
        if (named(parsed.service)) out.ignored.push_back({path, std::string(e.status().message()), removed});
        continue;
      }
      if (absl::IsInvalidArgument(e.status()) && !ProcessRuns(file_pid)) {
        // Malformed and its process gone (an older package's, a torn
        // write): stale whoever's it was, so cleaned and not said.
        if (clean) RemoveIfSame(path, inode);
        continue;
      }
      if (!e.ok()) {
        // An untrusted user's files are theirs, unless they claim this
        // service (then why they are not used is said); a malformed one of
        // a live process cannot say whose it is: said.
        const bool foreign = absl::IsPermissionDenied(e.status());
        if ((!foreign && parsed.service.empty()) || (!parsed.service.empty() && named(parsed.service))) {
          out.ignored.push_back({path, std::string(e.status().message()), false});
        }
        continue;
      }
      if (!named(e->service) || by_pid.count(e->pid) > 0) continue;
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

}  // namespace

Listing ListService(absl::string_view service, const std::vector<std::string>& dirs,
                    const Trust& trust, bool clean) {
  if (service.empty()) return Listing();  // no service has no name
  return ListMatching(service, dirs, trust, clean);
}

Listing ListAll(const std::vector<std::string>& dirs, const Trust& trust, bool clean) {
  return ListMatching("", dirs, trust, clean);
}

absl::StatusOr<Entry> FindPid(int pid, const std::vector<std::string>& dirs, const Trust& trust) {
  std::vector<std::string> notes;
  for (const std::string& dir : dirs) {
    const std::string path = EntryPath(dir, pid);
    absl::StatusOr<Entry> e = ReadEntry(path, pid, trust);
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

absl::StatusOr<std::vector<Entry>> Resolve(const ControlSpec& spec, const Trust& trust,
                                           std::vector<Ignored>* ignored) {
  if (spec.kind == ControlSpec::Kind::kAddress) {
    Entry e;
    e.address = spec.address;
    return std::vector<Entry>{e};
  }
  const std::vector<std::string> dirs = Dirs();
  if (spec.kind == ControlSpec::Kind::kPid) {
    absl::StatusOr<Entry> e = FindPid(spec.pid, dirs, trust);
    if (!e.ok()) return e.status();
    if (absl::Status s = CheckListener(*e); !s.ok()) return s;
    return std::vector<Entry>{*e};
  }
  Listing l = ListService(spec.service, dirs, trust, /*clean=*/true);
  // Just before the addresses are called: whose port each one is now.
  std::vector<Entry> checked;
  for (Entry& e : l.workers) {
    if (absl::Status s = CheckListener(e); !s.ok()) {
      l.ignored.push_back({e.path, std::string(s.message()), false});
    } else {
      checked.push_back(std::move(e));
    }
  }
  l.workers = std::move(checked);
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
