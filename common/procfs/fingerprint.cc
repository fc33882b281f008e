#include "common/procfs/fingerprint.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace procfs {
namespace {

// A small file's text (at most 4 KiB: every file read here is one line).
std::optional<std::string> ReadSmall(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[4096];
  ssize_t got;
  do {
    got = read(fd, buf, sizeof(buf));
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got < 0) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buf, got)));
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// "/a/b" -> "/a" -> "/" -> stop; at most 64 levels.
std::vector<std::string> PathToRoot(absl::string_view path) {
  std::string p(path.empty() ? "/" : path);
  std::vector<std::string> out;
  for (int i = 0; i < 64; ++i) {
    out.push_back(p);
    if (p == "/") break;
    const size_t slash = p.rfind('/');
    p = slash == 0 || slash == std::string::npos ? "/" : p.substr(0, slash);
  }
  return out;
}

// A limit as cores, for picking the tightest.
struct Limit {
  int64_t quota = -1, period = 0;  // quota -1: none
  double Cores() const { return quota < 0 || period <= 0 ? 1e18 : double(quota) / period; }
};

std::string Format(const Limit& tightest, bool any) {
  if (!any) return "";
  if (tightest.quota < 0) return "max";
  return absl::StrCat(tightest.quota, " ", tightest.period);
}

std::string VersionFromLibraryName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  const size_t so = base.find(".so.");
  return so == absl::string_view::npos ? "" : std::string(base.substr(so + 4));
}

}  // namespace

std::string SelectedMode(absl::string_view text) {
  const size_t open = text.find('[');
  const size_t close = text.find(']', open == absl::string_view::npos ? 0 : open);
  if (open == absl::string_view::npos || close == absl::string_view::npos) return "";
  return std::string(text.substr(open + 1, close - open - 1));
}

std::string GlibcBannerVersion(absl::string_view bytes) {
  static constexpr absl::string_view kMark = "GNU C Library";
  static constexpr absl::string_view kRelease = "release version ";
  size_t at = 0;
  while ((at = bytes.find(kMark, at)) != absl::string_view::npos) {
    // The banner is one line: "GNU C Library (...) stable release version 2.36."
    absl::string_view line = bytes.substr(at, 200);
    line = line.substr(0, line.find('\n'));
    if (const size_t r = line.find(kRelease); r != absl::string_view::npos) {
      absl::string_view v = line.substr(r + kRelease.size());
      size_t n = 0;
      while (n < v.size() && (absl::ascii_isdigit(v[n]) || v[n] == '.')) ++n;
      return std::string(absl::StripSuffix(v.substr(0, n), "."));
    }
    at += kMark.size();
  }
  return "";
}

std::string CgroupCpuMax(absl::string_view proc_cgroup_text, const std::string& cgroup_root) {
  std::string v2_path;
  bool have_v2 = false;
  for (absl::string_view line : absl::StrSplit(proc_cgroup_text, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    if (f[0] == "0" && f[1].empty()) {
      v2_path = std::string(f[2]);
      have_v2 = true;
      continue;
    }
    bool cpu = false;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) cpu = cpu || c == "cpu";
    if (!cpu) continue;
    // cgroup v1: the cpu controller's hierarchy, mounted as its controller
    // list ("cpu,cpuacct") or, with a symlink, as "cpu".
    std::string mount = absl::StrCat(cgroup_root, "/", f[1]);
    if (!Exists(mount)) mount = absl::StrCat(cgroup_root, "/cpu");
    Limit tightest;
    bool any = false;
    for (const std::string& p : PathToRoot(f[2])) {
      const std::string dir = p == "/" ? mount : mount + p;
      std::optional<std::string> q = ReadSmall(dir + "/cpu.cfs_quota_us");
      std::optional<std::string> per = ReadSmall(dir + "/cpu.cfs_period_us");
      Limit l;
      if (!q || !per || !absl::SimpleAtoi(*q, &l.quota) || !absl::SimpleAtoi(*per, &l.period)) {
        continue;
      }
      any = true;
      if (l.Cores() < tightest.Cores()) tightest = l;
    }
    return Format(tightest, any);
  }
  if (!have_v2) return "";
  // cgroup v2, mounted at the root or (hybrid layout) at ROOT/unified. The
  // root cgroup has no cpu.max: no file at a level is no limit there.
  std::string mount = cgroup_root;
  if (!Exists(mount + "/cgroup.controllers")) mount = cgroup_root + "/unified";
  if (!Exists(mount + "/cgroup.controllers")) return "";
  Limit tightest;
  for (const std::string& p : PathToRoot(v2_path)) {
    const std::string dir = p == "/" ? mount : mount + p;
    std::optional<std::string> m = ReadSmall(dir + "/cpu.max");
    if (!m) continue;
    std::pair<absl::string_view, absl::string_view> qp =
        absl::StrSplit(*m, absl::MaxSplits(' ', 1));
    Limit l;
    if (qp.first == "max" || !absl::SimpleAtoi(qp.first, &l.quota) ||
        !absl::SimpleAtoi(qp.second, &l.period)) {
      continue;
    }
    if (l.Cores() < tightest.Cores()) tightest = l;
  }
  return Format(tightest, true);
}

void ReadFingerprint(int pid, rsslab::v1::Fingerprint* out) {
  if (absl::StatusOr<std::map<std::string, std::string>> env = ReadAllocatorEnv(pid); env.ok()) {
    for (const auto& [k, v] : *env) (*out->mutable_start_env())[k] = v;
  }
  if (std::optional<std::string> online = ReadSmall("/sys/devices/system/cpu/online")) {
    out->set_cpus_online(std::max(0, CountCpuList(*online)));
  }
  if (absl::StatusOr<std::string> status = ReadProcFile(pid, "status"); status.ok()) {
    out->set_cpus_allowed(std::max(0, CountCpuList(StatusField(*status, "Cpus_allowed_list"))));
  }
  if (absl::StatusOr<std::string> cg = ReadProcFile(pid, "cgroup"); cg.ok()) {
    out->set_cgroup_cpu_max(CgroupCpuMax(*cg, "/sys/fs/cgroup"));
  }
  if (std::optional<std::string> thp = ReadSmall("/sys/kernel/mm/transparent_hugepage/enabled")) {
    out->set_thp_enabled(SelectedMode(*thp));
  }
}

void ReadOutsideFingerprint(int pid, absl::string_view maps_text, rsslab::v1::Fingerprint* out) {
  ReadFingerprint(pid, out);
  const MappedAllocator a = DetectAllocator(maps_text);
  out->set_allocator(a.name);
  const std::string libc = MappedPath(maps_text, "libc.so");
  if (!libc.empty()) {
    // Through the process's root first: it may live in another mount
    // namespace (a container) where the path means another file.
    const std::string proc = pid == 0 ? "/proc/self" : absl::StrCat("/proc/", pid);
    for (const std::string& path : {absl::StrCat(proc, "/root", libc), libc}) {
      int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      struct stat st;
      // libc.so.6 is about 2 MB; anything beyond 64 MiB is not a libc.
      if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (64 << 20)) {
        void* m = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
          out->set_glibc_version(
              GlibcBannerVersion(absl::string_view(static_cast<const char*>(m), st.st_size)));
          munmap(m, st.st_size);
        }
      }
      close(fd);
      if (!out->glibc_version().empty()) break;
    }
  }
  out->set_allocator_version(a.glibc ? out->glibc_version()
                                      : VersionFromLibraryName(a.library));
}

}  // namespace procfs
}  // namespace rsslab
