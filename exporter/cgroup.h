// The memory of the cgroup a process runs in, as the kernel's OOM killer
// and a kubelet's evictions see it, for cgroup v1 (the memory controller's
// own hierarchy) and v2 (the unified one).
//
//   v1: ROOT/memory/<path>/memory.usage_in_bytes, memory.limit_in_bytes,
//       memory.stat (total_inactive_file, total_rss, total_cache)
//   v2: ROOT/<path>/memory.current, memory.max, memory.stat (anon, file,
//       inactive_file)
//
// <path> is the process's line in /proc/PID/cgroup ("4:memory:/a/b" on v1,
// "0::/a/b" on v2). Inside a container that path is often the host's while
// ROOT shows the container's own cgroup: then ROOT itself is read. Working
// set = usage - inactive file pages (what cannot be dropped without
// writing or swapping); headroom = limit - working set.
//
//   absl::StatusOr<CgroupMemory> m = ReadCgroupMemory("/sys/fs/cgroup", proc_self_cgroup_text);
#ifndef RSSLAB_EXPORTER_CGROUP_H_
#define RSSLAB_EXPORTER_CGROUP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/metrics/exposition.h"

namespace rsslab {
namespace exporter {

struct CgroupMemory {
  int version = 0;    // 1 or 2
  std::string dir;    // the directory read
  int64_t usage_bytes = 0;          // v1 usage_in_bytes, v2 memory.current
  int64_t limit_bytes = -1;         // -1: no limit ("max", or v1's page-rounded LONG_MAX)
  int64_t anon_bytes = 0;           // v1 total_rss, v2 anon
  int64_t file_bytes = 0;           // v1 total_cache, v2 file
  int64_t inactive_file_bytes = 0;  // v1 total_inactive_file, v2 inactive_file
  int64_t working_set_bytes = 0;    // usage - inactive_file, at least 0
  int64_t headroom_bytes = -1;      // limit - working set; -1 without a limit
};

// `cgroup_root`: where the cgroup file systems are mounted (/sys/fs/cgroup,
// or a test's copy); `proc_cgroup`: the text of /proc/PID/cgroup. v1 when a
// line names the memory controller, else v2. The error names the file.
absl::StatusOr<CgroupMemory> ReadCgroupMemory(absl::string_view cgroup_root,
                                              absl::string_view proc_cgroup);

// rsslab_cgroup_memory_* gauges of `m`.
void AppendCgroupMetrics(const CgroupMemory& m, metrics::Exposition* e);

}  // namespace exporter
}  // namespace rsslab

#endif  // RSSLAB_EXPORTER_CGROUP_H_
