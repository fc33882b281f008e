#include "exporter/cgroup.h"

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"

namespace rsslab {
namespace exporter {
namespace {

// The cgroup files are a few KiB; anything bigger is not one.
constexpr size_t kMaxFileBytes = 64 << 10;
// v1 writes "no limit" as LONG_MAX rounded down to a page: anything this
// large is no limit.
constexpr int64_t kNoLimitAbove = int64_t{1} << 62;

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::string> Read(const std::string& path) {
  return ReadFileBounded(path, kMaxFileBytes, path);
}

absl::StatusOr<int64_t> ReadNumber(const std::string& path, bool max_means_none) {
  absl::StatusOr<std::string> text = Read(path);
  if (!text.ok()) return text.status();
  absl::string_view v = absl::StripAsciiWhitespace(*text);
  if (max_means_none && v == "max") return -1;
  int64_t n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, " does not hold a byte count"));
  }
  return max_means_none && n >= kNoLimitAbove ? -1 : n;
}

// One "key value" line of memory.stat; 0 when absent.
int64_t StatField(absl::string_view stat, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, ' ');
    int64_t n = 0;
    if (kv.first == key && absl::SimpleAtoi(kv.second, &n)) return n;
  }
  return 0;
}

// The path of the memory controller's line (v1) or of the unified one
// ("0::", v2), and which.
std::pair<int, std::string> CgroupPath(absl::string_view proc_cgroup) {
  std::string unified;
  bool has_unified = false;
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c == "memory") return {1, std::string(f[2])};
    }
    if (f[0] == "0" && f[1].empty()) {
      unified = std::string(f[2]);
      has_unified = true;
    }
  }
  return {has_unified ? 2 : 0, unified};
}

}  // namespace

absl::StatusOr<CgroupMemory> ReadCgroupMemory(absl::string_view cgroup_root,
                                              absl::string_view proc_cgroup) {
  auto [version, path] = CgroupPath(proc_cgroup);
  if (version == 0) {
    return absl::NotFoundError("no memory cgroup in /proc/PID/cgroup (neither v1's memory line nor v2's 0::)");
  }
  if (absl::StrContains(path, "..")) {
    return absl::InvalidArgumentError(absl::StrCat("cgroup path ", path, " holds '..'"));
  }
  CgroupMemory m;
  m.version = version;
  const std::string base = version == 1 ? absl::StrCat(cgroup_root, "/memory") : std::string(cgroup_root);
  m.dir = absl::StrCat(base, path == "/" ? "" : path);
  // A container's own view: the host's path is not there, its root is.
  if (!IsDir(m.dir)) m.dir = base;
  const std::string usage = version == 1 ? "memory.usage_in_bytes" : "memory.current";
  const std::string limit = version == 1 ? "memory.limit_in_bytes" : "memory.max";
  absl::StatusOr<int64_t> u = ReadNumber(absl::StrCat(m.dir, "/", usage), false);
  if (!u.ok()) return u.status();
  absl::StatusOr<int64_t> l = ReadNumber(absl::StrCat(m.dir, "/", limit), true);
  // The root cgroup has no memory.max on v2: no limit.
  m.limit_bytes = l.ok() ? *l : -1;
  absl::StatusOr<std::string> stat = Read(absl::StrCat(m.dir, "/memory.stat"));
  if (!stat.ok()) return stat.status();
  m.usage_bytes = *u;
  // v1's total_* count the hierarchy below too, as usage_in_bytes does.
  m.anon_bytes = StatField(*stat, version == 1 ? "total_rss" : "anon");
  m.file_bytes = StatField(*stat, version == 1 ? "total_cache" : "file");
  m.inactive_file_bytes = StatField(*stat, version == 1 ? "total_inactive_file" : "inactive_file");
  m.working_set_bytes = std::max<int64_t>(0, m.usage_bytes - m.inactive_file_bytes);
  m.headroom_bytes = m.limit_bytes < 0 ? -1 : m.limit_bytes - m.working_set_bytes;
  return m;
}

void AppendCgroupMetrics(const CgroupMemory& m, metrics::Exposition* e) {
  const metrics::Labels l = {{"cgroup_version", absl::StrCat(m.version)}};
  e->Gauge("rsslab_cgroup_memory_usage_bytes",
           "The cgroup's memory usage (v1 memory.usage_in_bytes, v2 memory.current).",
           m.usage_bytes, l);
  e->Gauge("rsslab_cgroup_memory_working_set_bytes",
           "Usage minus inactive file pages: what the OOM killer and evictions judge.",
           m.working_set_bytes, l);
  e->Gauge("rsslab_cgroup_memory_anon_bytes", "Anonymous memory of the cgroup.", m.anon_bytes, l);
  e->Gauge("rsslab_cgroup_memory_file_bytes", "Page cache of the cgroup.", m.file_bytes, l);
  e->Gauge("rsslab_cgroup_memory_inactive_file_bytes", "Inactive page cache of the cgroup.",
           m.inactive_file_bytes, l);
  // No series without a limit: a made-up number would read as a real one.
  if (m.limit_bytes >= 0) {
    e->Gauge("rsslab_cgroup_memory_limit_bytes", "The cgroup's memory limit.", m.limit_bytes, l);
    e->Gauge("rsslab_cgroup_memory_headroom_bytes", "The limit minus the working set.",
             m.headroom_bytes, l);
  }
}

}  // namespace exporter
}  // namespace rsslab
