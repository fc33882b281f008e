// The parts of a Control Snapshot that any process can fill about itself,
// without a server: /proc/self status, thread census and classified smaps,
// the allocator actually loaded with its statistics and start environment,
// and the trim history of a Trimmer. rsslab_server adds its phase, cache,
// workers and Python figures; the Python package adds the interpreter's.
//
// Example:
//   rsslab::v1::Snapshot snap;
//   FillProcessSnapshot({.detail = false}, &snap);  // pid, status, allocator...
//   FillTrimHistory(trimmer, &snap);                // last_trim, recent_trims...

#ifndef RSSLAB_MEMORY_SNAPSHOT_PROCESS_SNAPSHOT_H_
#define RSSLAB_MEMORY_SNAPSHOT_PROCESS_SNAPSHOT_H_

#include <cstdint>

#include "memory/trim/auto_trim.h"
#include "memory/trim/trimmer.h"
#include "proto/snapshot.pb.h"

namespace rsslab {

struct ProcessSnapshotOptions {
  // The 20 largest mappings by RSS, not only the classified totals.
  bool detail = false;
};

// unix_nanos, pid, status, thread_names, memory_map, allocator,
// allocator_library, allocator_env (what /proc/self/environ says the
// process started with), allocator_stats and fingerprint. Unreadable /proc files leave
// their fields empty: a snapshot never fails.
void FillProcessSnapshot(const ProcessSnapshotOptions& options, rsslab::v1::Snapshot* out);

// This process's Fingerprint, with glibc's and the allocator's versions as
// they report them; `filled` holds allocator and allocator_stats already.
void FillFingerprint(const rsslab::v1::Snapshot& filled, rsslab::v1::Fingerprint* out);

// last_trim, trims_total, recent_trims and auto_trims_total.
void FillTrimHistory(const Trimmer& trimmer, rsslab::v1::Snapshot* out);

// The automatic policy's view at its last tick (Snapshot.auto_trim).
void FillAutoTrimState(const AutoTrimDecision& d, const AutoTrimOptions& options,
                       int64_t baseline_rss_bytes, rsslab::v1::AutoTrimState* out);

}  // namespace rsslab

#endif  // RSSLAB_MEMORY_SNAPSHOT_PROCESS_SNAPSHOT_H_
