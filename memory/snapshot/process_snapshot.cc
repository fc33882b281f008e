#include "memory/snapshot/process_snapshot.h"

#include <gnu/libc-version.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "common/procfs/fingerprint.h"
#include "common/procfs/procfs.h"
#include "memory/alloc/alloc.h"

namespace rsslab {

void FillProcessSnapshot(const ProcessSnapshotOptions& options, rsslab::v1::Snapshot* out) {
  out->set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  out->set_pid(getpid());
  procfs::ReadStatus(0, out->mutable_status()).IgnoreError();
  procfs::ThreadCensus(0, out->mutable_thread_names()).IgnoreError();
  procfs::ReadSmaps(0, options.detail ? 20 : 0, out->mutable_memory_map()).IgnoreError();

  const alloc::Allocator& a = alloc::Allocator::Get();
  out->set_allocator(a.name());
  out->set_allocator_library(a.library());
  absl::StatusOr<std::map<std::string, std::string>> env = procfs::ReadAllocatorEnv(0);
  if (env.ok()) {
    for (const auto& kv : *env) (*out->mutable_allocator_env())[kv.first] = kv.second;
  }
  a.FillStats(out->mutable_allocator_stats());
  FillFingerprint(*out, out->mutable_fingerprint());
}

void FillFingerprint(const rsslab::v1::Snapshot& filled, rsslab::v1::Fingerprint* out) {
  procfs::ReadFingerprint(0, out);
  out->set_glibc_version(gnu_get_libc_version());
  out->set_allocator(filled.allocator());
  // The allocator's own word on its version (what its stats report).
  out->set_allocator_version(alloc::Allocator::Get().Version());
}

void FillTrimHistory(const Trimmer& trimmer, rsslab::v1::Snapshot* out) {
  if (trimmer.has_last()) *out->mutable_last_trim() = trimmer.last();
  out->set_trims_total(trimmer.count());
  for (rsslab::v1::TrimResult& t : trimmer.recent()) *out->add_recent_trims() = std::move(t);
  out->set_auto_trims_total(trimmer.auto_count());
  for (const auto& [trigger, t] : trimmer.totals()) {
    rsslab::v1::TrimTotals* p = out->add_trim_totals();
    p->set_trigger(trigger);
    p->set_count(t.count);
    p->set_freed_bytes(t.freed_bytes);
    p->set_duration_us(absl::ToInt64Microseconds(t.duration));
    p->set_worker_pause_us(absl::ToInt64Microseconds(t.worker_pause));
    p->set_longest_worker_pause_us(absl::ToInt64Microseconds(t.longest_worker_pause));
  }
}

void FillAutoTrimState(const AutoTrimDecision& d, const AutoTrimOptions& options,
                       int64_t baseline_rss_bytes, rsslab::v1::AutoTrimState* out) {
  out->set_rate(d.rate);
  out->set_peak_rate(d.peak_rate);
  out->set_gap_bytes(d.gap_bytes);
  out->set_gap_threshold_bytes(options.gap_bytes);
  out->set_load_dropped(d.low);
  out->set_armed(d.armed);
  out->set_baseline_rss_bytes(baseline_rss_bytes);
}

}  // namespace rsslab
