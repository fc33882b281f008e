#include "server/trimmer.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "server/alloc/alloc.h"
#include "server/procfs/procfs.h"

namespace rsslab {
namespace {

int64_t RssNow() {
  rsslab::v1::ProcStatus st;
  if (!procfs::ReadStatus(0, &st).ok()) return -1;
  return st.rss_bytes();
}

}  // namespace

Trimmer::Trimmer(WorkerPool* workers, absl::Duration worker_timeout)
    : workers_(workers), worker_timeout_(worker_timeout) {}

rsslab::v1::TrimResult Trimmer::Run(rsslab::v1::TrimMode mode, const std::string& trigger) {
  absl::MutexLock run_lock(&run_mu_);
  const alloc::Allocator& a = alloc::Allocator::Get();
  rsslab::v1::TrimResult r;
  r.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  r.set_trigger(trigger);
  r.set_allocator(a.name());
  r.set_rss_before_bytes(RssNow());
  r.set_allocator_resident_before(a.ResidentBytes());

  const bool global = mode != rsslab::v1::TRIM_PER_THREAD;
  const bool per_thread = mode != rsslab::v1::TRIM_GLOBAL_ONLY && workers_ != nullptr;
  if (global) {
    absl::Time t0 = absl::Now();
    alloc::Allocator::Release rel = a.ReleaseGlobal();
    r.set_trim_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
    r.set_call(rel.call);
    r.set_call_return(rel.ret);
  }
  r.set_rss_between_bytes(RssNow());
  r.set_allocator_resident_between(a.ResidentBytes());
  r.set_global_freed_bytes(r.rss_before_bytes() - r.rss_between_bytes());

  if (per_thread) {
    r.set_per_thread(true);
    absl::Mutex call_mu;
    std::string thread_call;
    absl::Time t0 = absl::Now();
    std::vector<WorkerRun> runs = workers_->RunOnEachWorker(
        [&a, &call_mu, &thread_call](int) {
          alloc::Allocator::Release rel = a.ReleaseThisThread();
          absl::MutexLock l(&call_mu);
          thread_call = rel.call;
        },
        worker_timeout_);
    absl::Time t1 = absl::Now();
    alloc::Allocator::Release after = a.ReleaseAfterThreads();
    r.set_after_threads_duration_us(absl::ToInt64Microseconds(absl::Now() - t1));
    r.set_after_threads_call(after.call);
    r.set_after_threads_return(after.ret);
    r.set_per_thread_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
    {
      absl::MutexLock l(&call_mu);
      r.set_thread_call(thread_call);
    }
    int64_t max_pause = 0;
    for (const WorkerRun& w : runs) {
      rsslab::v1::WorkerTrim* wt = r.add_workers();
      wt->set_worker(w.worker);
      wt->set_tid(w.tid);
      wt->set_ran(w.ran);
      wt->set_pause_us(absl::ToInt64Microseconds(w.pause));
      if (!w.ran) wt->set_error("worker busy past the trim timeout (stuck?)");
      max_pause = std::max(max_pause, wt->pause_us());
    }
    r.set_max_worker_pause_us(max_pause);
  }
  r.set_rss_after_bytes(RssNow());
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
