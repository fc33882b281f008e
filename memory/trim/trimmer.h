// Gives free memory back through whichever allocator is loaded, timed.
//
// The global release runs on the calling thread (glibc malloc_trim(0),
// jemalloc arena purge, mimalloc mi_collect, tcmalloc ReleaseFreeMemory);
// the per-thread pass then runs the allocator's thread-level release on
// every worker thread, between requests, because thread-local heaps and
// caches can only be released from their own thread (DESIGN.md, "Trim must
// reach every worker thread"). The result reports both parts separately.
//
// Example:
//   Trimmer trimmer(&workers);  // a ThreadSet, e.g. the server's WorkerPool
//   rsslab::v1::TrimResult r = trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "manual");

#ifndef RSSLAB_MEMORY_TRIM_TRIMMER_H_
#define RSSLAB_MEMORY_TRIM_TRIMMER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "proto/snapshot.pb.h"
#include "memory/trim/thread_set.h"

namespace rsslab {

class Trimmer {
 public:
  // `workers` may be null (no per-thread pass): the server's WorkerPool, or
  // any other ThreadSet (the Python package's tracked threads). Per-worker
  // waits are bounded by `worker_timeout`: a stuck worker is reported, not
  // waited for forever.
  // `thread_stats`: each worker also reads the allocator's per-thread
  // figures right before and after its release (WorkerTrim.before/after;
  // --trim_thread_stats), for explaining what a release could not return.
  explicit Trimmer(ThreadSet* workers, absl::Duration worker_timeout = absl::Seconds(10),
                   bool thread_stats = false);

  // mimalloc 2.0.x with the decommit delay overridden to 0 (no wait before
  // the follow-up): run each worker's follow-up in the same visit, right
  // after its release, instead of in a second pass over every worker. Each
  // visit of a pass interrupts a worker's serving (the package's visits are
  // tasks queued among the requests), so one visit instead of two. The
  // follow-up only touches the worker's own segments, so the order across
  // workers does not matter. Set before the first Run.
  void set_follow_up_in_pass(bool in_pass) { follow_up_in_pass_ = in_pass; }

  // `worker_timeout` (when shorter than the constructor's) bounds the wait
  // for each worker of this run: a control call's deadline.
  // `after_release`, if set, runs on each worker right after its own
  // release (and its follow-up, when in the same visit) and before its
  // after-figures are read, so they count it (the package's free-block
  // purge). It may run after Run returns (a worker past the timeout): it
  // must own what it touches.
  rsslab::v1::TrimResult Run(rsslab::v1::TrimMode mode, const std::string& trigger,
                             absl::Duration worker_timeout = absl::InfiniteDuration(),
                             std::function<void()> after_release = nullptr);

  bool has_last() const;
  rsslab::v1::TrimResult last() const;
  uint64_t count() const;
  // The last kRecent trims, oldest first, and how many were automatic.
  static constexpr size_t kRecent = 16;
  std::vector<rsslab::v1::TrimResult> recent() const;
  uint64_t auto_count() const;

  // Running totals since start, per trigger ("manual", "phase",
  // "auto_after_burst", "auto_interval"): what the Prometheus counters show
  // (recent() keeps only the last kRecent trims).
  struct TriggerTotals {
    uint64_t count = 0;
    // Sum of the positive freed_bytes (a trim under load can end with more
    // RSS than it started with; a counter must not go down).
    uint64_t freed_bytes = 0;
    // Global release + per-thread pass.
    absl::Duration duration;
    absl::Duration worker_pause;  // sum of each trim's max worker pause
    absl::Duration longest_worker_pause;  // the largest of them
  };
  std::map<std::string, TriggerTotals> totals() const;

 private:
  ThreadSet* const workers_;
  const absl::Duration worker_timeout_;
  const bool thread_stats_;
  bool follow_up_in_pass_ = false;
  // One trim at a time: concurrent releases would only contend on the
  // allocator's locks and muddle the before/after figures.
  absl::Mutex run_mu_;
  mutable absl::Mutex mu_;
  rsslab::v1::TrimResult last_ ABSL_GUARDED_BY(mu_);
  bool has_last_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t auto_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<rsslab::v1::TrimResult> recent_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, TriggerTotals> totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rsslab

#endif  // RSSLAB_MEMORY_TRIM_TRIMMER_H_
