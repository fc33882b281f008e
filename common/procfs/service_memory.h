// A pre-fork service's memory from /proc: its master (the workers' common
// parent, a fork of the same executable) and every worker, summed.
//
//   int master = rsslab::procfs::FindMaster({4242, 4243});   // 0: none
//   absl::StatusOr<rsslab::v1::ServiceMemory> m =
//       rsslab::procfs::ReadServiceMemory(master, {4242, 4243});
//   // m->rss_bytes(): master + workers; m->pss_bytes(): shared pages once
//   rsslab::v1::Snapshot s = rsslab::procfs::ServiceSnapshot(*m, worker_snaps);
#ifndef RSSLAB_COMMON_PROCFS_SERVICE_MEMORY_H_
#define RSSLAB_COMMON_PROCFS_SERVICE_MEMORY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

// The workers' common parent when it runs the same executable as they do
// (/proc/PID/exe): gunicorn's, uWSGI's or Celery's master, the parent of
// gRPC's multiprocessing pattern. 0 when the workers have different
// parents, the parent is pid 1, or it runs another program (a shell that
// started them one by one is not part of the service).
int FindMaster(const std::vector<int>& worker_pids);

// The live children of `pid` (/proc/PID/task/*/children), sorted.
std::vector<int> ChildrenOf(int pid);
// Whether `pid` is `ancestor` or one of its descendants (parents followed
// through /proc/PID/stat, at most 64 levels).
bool DescendsFrom(int pid, int ancestor);

// Whether a worker runs as its verified master does: `library` (the
// allocator library the launch verified; "" for glibc) in its
// /proc/PID/maps and each of `env` (the allocator variables verified) in
// its /proc/PID/environ with the same value. INVALID_ARGUMENT naming the
// worker and what differs.
absl::Status SameAllocatorSetup(int pid, const std::string& library,
                                const std::map<std::string, std::string>& env);

// The Pss: line of /proc/PID/smaps_rollup text, bytes; -1 if absent.
int64_t ParsePss(absl::string_view smaps_rollup);

// Reads each process (`master_pid` first unless 0, then the workers by
// pid): VmRSS, VmHWM, RssAnon and Threads from status, Pss from
// smaps_rollup. An error names the first process that is gone.
absl::StatusOr<rsslab::v1::ServiceMemory> ReadServiceMemory(
    int master_pid, std::vector<int> worker_pids);

// The service's snapshot: `first` (the first worker's own, from its
// Control; may be empty) with status holding the totals of `memory`, the
// workers' arena counts summed, and `memory` itself in `service`.
rsslab::v1::Snapshot ServiceSnapshot(const rsslab::v1::ServiceMemory& memory,
                                     const std::vector<rsslab::v1::Snapshot>& workers);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_SERVICE_MEMORY_H_
