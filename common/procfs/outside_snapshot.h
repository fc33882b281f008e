// A Snapshot of another process read from outside, from /proc/PID alone:
// for the user's own program (rsslab_agent --allow_command) when it runs no
// rsslab Control service. Only what /proc shows is filled: status (RSS,
// HWM, threads), memory_map (smaps classified), allocator and
// allocator_env; taken_from is "proc". Nothing of the process's insides
// (cache, Python heap, allocator stats) is claimed.
//
//   absl::StatusOr<rsslab::v1::Snapshot> s = rsslab::procfs::OutsideSnapshot(pid);
#ifndef RSSLAB_COMMON_PROCFS_OUTSIDE_SNAPSHOT_H_
#define RSSLAB_COMMON_PROCFS_OUTSIDE_SNAPSHOT_H_

#include "absl/status/statusor.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

absl::StatusOr<rsslab::v1::Snapshot> OutsideSnapshot(int pid);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_OUTSIDE_SNAPSHOT_H_
