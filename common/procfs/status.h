// /proc/<pid>/status and this process's statm: memory sizes, threads,
// CPUs allowed.
//
// Example:
//
//   rsslab::v1::ProcStatus status;
//   absl::Status s = rsslab::procfs::ReadStatus(/*pid=*/0, &status);  // self
//   int64_t rss = rsslab::procfs::StatmRssBytes();  // cheap: one short read
#ifndef RSSLAB_COMMON_PROCFS_STATUS_H_
#define RSSLAB_COMMON_PROCFS_STATUS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

// Parses /proc/<pid>/status text. Sizes are converted from kB to bytes.
// Fields absent from `text` are left at 0; an error if there is no VmRSS
// line (a kernel thread or a zombie has none: nothing to report).
absl::Status ParseStatus(absl::string_view text, rsslab::v1::ProcStatus* out);
absl::Status ReadStatus(int pid, rsslab::v1::ProcStatus* out);

// This process's resident bytes from /proc/self/statm: one small read, no
// status or smaps parse (a trim's before/after figures, the automatic trim's
// samples five times a second). -1 if unreadable.
int64_t StatmRssBytes();

// "0-3,8,10-11" -> 7 (Cpus_allowed_list). -1 if malformed.
int CountCpuList(absl::string_view list);

// The value of a "Key:\tvalue" line of /proc/PID/status text, trimmed
// ("" if absent), e.g. StatusField(text, "Cpus_allowed_list").
absl::string_view StatusField(absl::string_view status_text, absl::string_view key);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_STATUS_H_
