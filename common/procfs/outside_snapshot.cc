#include "common/procfs/outside_snapshot.h"

#include "absl/time/clock.h"
#include "common/procfs/fingerprint.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace procfs {

absl::StatusOr<rsslab::v1::Snapshot> OutsideSnapshot(int pid) {
  const absl::Time start = absl::Now();
  rsslab::v1::Snapshot s;
  s.set_pid(pid);
  s.set_taken_from("proc");
  if (absl::Status st = ReadStatus(pid, s.mutable_status()); !st.ok()) return st;
  if (absl::Status st = ReadSmaps(pid, /*detail_top_n=*/0, s.mutable_memory_map()); !st.ok()) {
    return st;
  }
  absl::StatusOr<std::string> maps = ReadProcFile(pid, "maps");
  if (!maps.ok()) return maps.status();
  const MappedAllocator a = DetectAllocator(*maps);
  s.set_allocator(a.name);
  s.set_allocator_library(a.library);
  absl::StatusOr<std::map<std::string, std::string>> env = ReadAllocatorEnv(pid);
  if (env.ok()) {
    for (const auto& [k, v] : *env) (*s.mutable_allocator_env())[k] = v;
  }
  ReadOutsideFingerprint(pid, *maps, s.mutable_fingerprint());
  s.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  s.set_snapshot_duration_us(absl::ToInt64Microseconds(absl::Now() - start));
  return s;
}

}  // namespace procfs
}  // namespace rsslab
