#include "memory/trim/trimmer.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "memory/alloc/alloc.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace {

// Per-thread results: a worker counts as reached only if both its release
// and its follow-up visit ran; its pause is the sum of the two.
void FillWorkerResults(
    const std::vector<WorkerRun>& runs, const std::vector<WorkerRun>& follow_up,
    const std::map<int, std::pair<rsslab::v1::ThreadAllocStats, rsslab::v1::ThreadAllocStats>>& stats,
    rsslab::v1::TrimResult* r) {
  int64_t max_pause = 0;
  for (const WorkerRun& w : runs) {
    rsslab::v1::WorkerTrim* wt = r->add_workers();
    wt->set_worker(w.worker);
    wt->set_tid(w.tid);
    absl::Duration pause = w.pause;
    bool ran = w.ran;
    const size_t i = static_cast<size_t>(&w - runs.data());
    if (i < follow_up.size()) {
      const WorkerRun& f = follow_up[i];
      pause += f.pause;
      ran = ran && f.ran;
    }
    wt->set_ran(ran);
    wt->set_pause_us(absl::ToInt64Microseconds(pause));
    if (!ran) wt->set_error("worker busy past the trim timeout (stuck?)");
    auto it = stats.find(w.worker);
    if (w.ran && it != stats.end()) {
      *wt->mutable_before() = it->second.first;
      *wt->mutable_after() = it->second.second;
    }
    max_pause = std::max(max_pause, wt->pause_us());
  }
  r->set_max_worker_pause_us(max_pause);
}

// The per-thread part of a trim: each worker releases its own caches on its
// own thread, then (mimalloc 2.0.x) a follow-up visit, then the allocator's
// after-threads step.
void RunPerThreadPass(ThreadSet* workers, absl::Duration timeout, bool thread_stats,
                      bool follow_up_in_pass, const alloc::Allocator& a,
                      const alloc::Allocator::DelayOverride& delay,
                      const std::function<void()>& after_release, rsslab::v1::TrimResult* r) {
  r->set_per_thread(true);
  // Shared with the workers: one stuck past the timeout still runs the
  // release later, and must find its state alive.
  struct PassState {
    absl::Mutex mu;
    std::string call ABSL_GUARDED_BY(mu);
    std::string follow_up_call ABSL_GUARDED_BY(mu);
    std::map<int, std::pair<rsslab::v1::ThreadAllocStats, rsslab::v1::ThreadAllocStats>> stats
        ABSL_GUARDED_BY(mu);
  };
  auto state = std::make_shared<PassState>();
  absl::Time t0 = absl::Now();
  // With the delay at 0 the follow-up needs no wait: it can share the visit.
  const bool folded = follow_up_in_pass && a.HasFollowUp() && delay.applied;
  std::vector<WorkerRun> runs = workers->RunOnEachWorker(
      [&a, state, thread_stats, folded, after_release](int worker) {
        rsslab::v1::ThreadAllocStats before, after;
        if (thread_stats) a.FillThreadStats(&before);
        alloc::Allocator::Release rel = a.ReleaseThisThread();
        alloc::Allocator::Release follow;
        if (folded) follow = a.FollowUpThisThread();
        if (after_release) after_release();
        if (thread_stats) a.FillThreadStats(&after);
        absl::MutexLock l(&state->mu);
        state->call = rel.call;
        if (folded) state->follow_up_call = follow.call;
        if (thread_stats) state->stats[worker] = {before, after};
      },
      timeout);
  // mimalloc 2.0.x: spans freed while the decommit delay was > 0 (before
  // this trim) are decommitted only when the owning thread frees or
  // allocates a page again (alloc.h). With the delay overridden to 0 that
  // visit needs no wait; without the override (mi_option_set missing) it
  // waits out the delay, which returns less (docs/TRIM.md).
  const absl::Duration follow_up_delay = a.FollowUpDelay();
  std::vector<WorkerRun> follow_up;
  // mimalloc 3.x has no per-thread segments: nothing to visit for.
  if (!folded && a.HasFollowUp() && (delay.applied || follow_up_delay > absl::ZeroDuration())) {
    absl::SleepFor(follow_up_delay);
    r->set_follow_up_delay_us(absl::ToInt64Microseconds(follow_up_delay));
    follow_up = workers->RunOnEachWorker(
        [&a, state](int) {
          alloc::Allocator::Release rel = a.FollowUpThisThread();
          absl::MutexLock l(&state->mu);
          state->follow_up_call = rel.call;
        },
        timeout);
  }
  absl::Time t1 = absl::Now();
  alloc::Allocator::Release after = a.ReleaseAfterThreads();
  r->set_after_threads_duration_us(absl::ToInt64Microseconds(absl::Now() - t1));
  r->set_after_threads_call(after.call);
  r->set_after_threads_return(after.ret);
  r->set_per_thread_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
  absl::MutexLock l(&state->mu);
  r->set_thread_call(state->call);
  r->set_follow_up_call(state->follow_up_call);
  FillWorkerResults(runs, follow_up, state->stats, r);
}

}  // namespace

Trimmer::Trimmer(ThreadSet* workers, absl::Duration worker_timeout, bool thread_stats)
    : workers_(workers), worker_timeout_(worker_timeout), thread_stats_(thread_stats) {}

rsslab::v1::TrimResult Trimmer::Run(rsslab::v1::TrimMode mode, const std::string& trigger,
                                    absl::Duration worker_timeout,
                                    std::function<void()> after_release) {
  absl::MutexLock run_lock(&run_mu_);
  const alloc::Allocator& a = alloc::Allocator::Get();
  rsslab::v1::TrimResult r;
  r.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  r.set_trigger(trigger);
  r.set_allocator(a.name());
  r.set_rss_before_bytes(procfs::StatmRssBytes());
  r.set_allocator_resident_before(a.ResidentBytes());

  // For the whole trim, so the global release frees with immediate decommit
  // too; restored below, before anything else can run a trim (run_mu_).
  const alloc::Allocator::DelayOverride delay = a.OverrideReleaseDelay();

  const bool global = mode != rsslab::v1::TRIM_PER_THREAD;
  const bool per_thread = mode != rsslab::v1::TRIM_GLOBAL_ONLY && workers_ != nullptr;
  if (global) {
    absl::Time t0 = absl::Now();
    alloc::Allocator::Release rel = a.ReleaseGlobal();
    r.set_trim_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
    r.set_call(rel.call);
    r.set_call_return(rel.ret);
  }
  r.set_rss_between_bytes(procfs::StatmRssBytes());
  r.set_allocator_resident_between(a.ResidentBytes());
  r.set_global_freed_bytes(r.rss_before_bytes() - r.rss_between_bytes());

  if (per_thread) {
    RunPerThreadPass(workers_, std::min(worker_timeout_, worker_timeout), thread_stats_,
                     follow_up_in_pass_, a, delay, after_release, &r);
  }
  if (!delay.option.empty()) {
    r.set_release_delay_option(delay.option);
    r.set_release_delay_before(delay.before);
    r.set_release_delay_during(delay.during);
    r.set_release_delay_overridden(delay.applied);
  }
  const int64_t restored = a.RestoreReleaseDelay(delay);
  if (!delay.option.empty()) r.set_release_delay_after(restored);
  // mimalloc 3.x: the purges its collects skipped while the delay was 0.
  const alloc::Allocator::Release after_restore = a.ReleaseAfterRestore(delay);
  r.set_after_restore_call(after_restore.call);
  r.set_rss_after_bytes(procfs::StatmRssBytes());
  r.set_allocator_resident_after(a.ResidentBytes());
  r.set_per_thread_freed_bytes(r.rss_between_bytes() - r.rss_after_bytes());
  r.set_freed_bytes(r.rss_before_bytes() - r.rss_after_bytes());

  absl::MutexLock lock(&mu_);
  last_ = r;
  has_last_ = true;
  ++count_;
  if (absl::StartsWith(trigger, "auto")) ++auto_count_;
  TriggerTotals& t = totals_[trigger];
  ++t.count;
  t.freed_bytes += static_cast<uint64_t>(std::max<int64_t>(0, r.freed_bytes()));
  t.duration += absl::Microseconds(r.trim_duration_us() + r.per_thread_duration_us());
  t.worker_pause += absl::Microseconds(r.max_worker_pause_us());
  t.longest_worker_pause = std::max(t.longest_worker_pause, absl::Microseconds(r.max_worker_pause_us()));
  recent_.push_back(r);
  if (recent_.size() > kRecent) recent_.pop_front();
  return r;
}

bool Trimmer::has_last() const {
  absl::MutexLock lock(&mu_);
  return has_last_;
}

rsslab::v1::TrimResult Trimmer::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

std::vector<rsslab::v1::TrimResult> Trimmer::recent() const {
  absl::MutexLock lock(&mu_);
  return {recent_.begin(), recent_.end()};
}

uint64_t Trimmer::auto_count() const {
  absl::MutexLock lock(&mu_);
  return auto_count_;
}

std::map<std::string, Trimmer::TriggerTotals> Trimmer::totals() const {
  absl::MutexLock lock(&mu_);
  return totals_;
}

uint64_t Trimmer::count() const {
  absl::MutexLock lock(&mu_);
  return count_;
}

}  // namespace rsslab
