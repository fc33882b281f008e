#include "control/ops/control_ops.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/procfs/procfs.h"
#include "memory/alloc/alloc.h"
#include "memory/snapshot/process_snapshot.h"

namespace rsslab {
namespace {

// The default mode's purge. A worker's block walk (free_block_purge.h) runs only
// when a look at its walkable pages finds at least this much resident in
// their free blocks: a release every 2 s under steady load finds less on
// almost every worker and skips the walk, which visits every block of the
// heap; a release after a burst finds megabytes. At 64 workers what a skip
// can leave behind is at most 64 x 256 KiB.
constexpr int64_t kPurgeMinResidentBytes = 256 << 10;
// Within kPurgeSpacing of this thread's last walk, only a burst's worth:
// under steady load each worker refills some free blocks between releases
// (a walk on a third of 64 workers, each 16-110 ms on a loaded 2-core
// machine, at every release 2 s apart), which it would fault back in soon.
// With 10 s, the walk that came due every 10 s paused a worker 26-31 ms
// under a steady 300 requests/s (docs/PACKAGE.md, "Measured"): a few MiB
// per worker are not worth that more often than every 5 minutes.
constexpr int64_t kPurgeSoonAgainBytes = 4 << 20;
constexpr absl::Duration kPurgeSpacing = absl::Seconds(300);
thread_local absl::Time t_last_walk = absl::InfinitePast();

// after_burst: RSS grew by a burst's worth since the last release ended
// (kBurstGrowth, or half again): then every heap with a little to return
// is walked, however recently.
constexpr int64_t kBurstGrowth = 64 << 20;

// An automatic trim waits for each worker at most this long: it is no
// caller's, and a busy worker is reported rather than waited for.
constexpr absl::Duration kAutoTrimWorkerTimeout = absl::Seconds(2);

int64_t PurgeThresholdThisThread(bool after_burst) {
  if (after_burst) return kPurgeMinResidentBytes;
  return absl::Now() - t_last_walk < kPurgeSpacing ? kPurgeSoonAgainBytes
                                                   : kPurgeMinResidentBytes;
}

void NoteWalkThisThread(const alloc::FreeBlockPurge& p) {
  if (p.ran && !p.skipped) t_last_walk = absl::Now();
}

}  // namespace

ControlOps::ControlOps(ControlHost* host, const Options& options)
    : host_(host),
      options_(options),
      start_(options.start),
      trimmer_(options.threads, options.worker_timeout, options.thread_stats) {
  trimmer_.set_follow_up_in_pass(options.follow_up_in_pass);
}

ControlOps::~ControlOps() { StopAutoTrim(); }

absl::Status ControlOps::SetPhase(const SetPhaseCall& call,
                                  rsslab::v1::SetPhaseResponse* response,
                                  absl::Duration python_deadline) {
  if (absl::Status s = host_->EnterPhase(call, python_deadline, response); !s.ok()) return s;
  ControlSnapshotOptions snap;
  snap.gc = call.gc;
  snap.detail = call.detail;
  snap.python_deadline = python_deadline;
  if (call.phase == rsslab::v1::PHASE_TRIM) {
    TakeSnapshot(snap, response->mutable_before());
    *response->mutable_trim() = Release(call.trim_mode, "phase", python_deadline);
    snap.gc = false;  // the "before" snapshot already collected
  }
  // Past the deadline, the snapshot's python.unavailable says why.
  TakeSnapshot(snap, response->mutable_snapshot());
  return absl::OkStatus();
}

absl::Status ControlOps::Trim(const TrimCall& call, rsslab::v1::TrimResponse* response,
                              absl::Duration python_deadline) {
  std::string gc_skipped;
  if (call.gc && !host_->CollectGarbage(python_deadline, &gc_skipped)) {
    gc_skipped = absl::StrCat("gc skipped: ", gc_skipped);
  } else {
    gc_skipped.clear();
  }
  *response->mutable_trim() = Release(call.mode, "manual", python_deadline);
  ControlSnapshotOptions after;
  after.python_deadline = python_deadline;
  TakeSnapshot(after, response->mutable_after());
  // The trim ran without its gc: said where the caller looks for Python.
  if (!gc_skipped.empty()) response->mutable_after()->mutable_python()->set_unavailable(gc_skipped);
  return absl::OkStatus();
}

rsslab::v1::TrimResult ControlOps::Release(rsslab::v1::TrimMode mode, const std::string& trigger,
                                           absl::Duration worker_timeout) {
  // mimalloc (2.0.x, 3.x) returns a page only with its last live block; the
  // purge returns the pages inside its free blocks, on each worker right
  // after that worker's own release (free_block_purge.h).
  const bool every_heap = mode == rsslab::v1::TRIM_FREE_BLOCK_PURGE;
  const bool purging =
      every_heap ||
      (mode == rsslab::v1::TRIM_MODE_DEFAULT &&
       alloc::Allocator::Get().KeepsPagesWithLiveBlocks());
  auto total = std::make_shared<alloc::PurgeTotal>();
  std::function<void()> step;
  if (every_heap) {
    // Asked for by name: every worker walks its heap, however little it holds.
    step = total->Step([] { return int64_t{0}; });
  } else if (purging) {
    const int64_t rss = procfs::StatmRssBytes();
    const int64_t last = last_rss_after_.load();
    const bool after_burst =
        last <= 0 || rss - last >= std::min<int64_t>(kBurstGrowth, last / 2);
    step = total->Step([after_burst] { return PurgeThresholdThisThread(after_burst); },
                       NoteWalkThisThread);
  }
  // The purge before each worker's after-figures, so they show what stays.
  rsslab::v1::TrimResult r = trimmer_.Run(mode, trigger, worker_timeout, std::move(step));
  if (r.per_thread() && r.thread_call().empty()) host_->ExplainEmptyPass(&r);
  last_rss_after_.store(procfs::StatmRssBytes());
  if (purging) {
    total->ToProto(r.mutable_free_block_purge());
    absl::MutexLock l(&purge_mu_);
    last_purge_ = total->Get();
  }
  if (!absl::StartsWith(trigger, "auto")) {
    absl::MutexLock l(&auto_mu_);
    if (auto_trim_) auto_trim_->NoteTrim(absl::Now());
  }
  return r;
}

alloc::FreeBlockPurge ControlOps::last_purge() const {
  absl::MutexLock l(&purge_mu_);
  return last_purge_;
}

void ControlOps::TakeSnapshot(const ControlSnapshotOptions& options, rsslab::v1::Snapshot* out) {
  // Python's part first (it may collect garbage, which changes the rest),
  // within its deadline: the rest needs no GIL and is filled regardless.
  host_->FillPythonPart(options, out);
  const absl::Time t0 = absl::Now();
  ProcessSnapshotOptions process;
  process.detail = options.detail;
  FillProcessSnapshot(process, out);
  out->set_uptime_s(absl::ToDoubleSeconds(t0 - start_));
  host_->FillHostPart(options.detail, out);
  FillTrimHistory(trimmer_, out);
  {
    absl::MutexLock l(&auto_mu_);
    out->mutable_config()->set_auto_trim(
        AutoTrimModeName(auto_trim_ ? auto_options_.mode : AutoTrimOptions::Mode::kOff));
    if (auto_trim_) {
      FillAutoTrimState(auto_trim_->last(), auto_options_, baseline_rss_.load(),
                        out->mutable_auto_trim());
    }
  }
  out->set_snapshot_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
}

void ControlOps::Sample(AutoTrimSample* s) {
  s->requests = host_->LoadCount();
  s->rss_bytes = procfs::StatmRssBytes();
  // Where the allocator counts allocated bytes (jemalloc, tcmalloc) that is
  // the live figure; otherwise what the host says it holds (the server's
  // cache, the package's glibc heap), the memory a long-lived heap
  // legitimately keeps above the idle baseline.
  const int64_t base = baseline_rss_.load();
  const int64_t allocated = alloc::Allocator::Get().AllocatedBytes();
  if (allocated >= 0 && baseline_allocated_ >= 0) {
    s->live_bytes = base + std::max<int64_t>(0, allocated - baseline_allocated_);
    return;
  }
  const int64_t held = host_->HeldBytes();
  s->live_bytes = base;
  if (held >= 0 && baseline_held_ >= 0) s->live_bytes += std::max<int64_t>(0, held - baseline_held_);
}

void ControlOps::StartAutoTrim(const AutoTrimOptions& options) {
  StopAutoTrim();
  absl::MutexLock l(&auto_mu_);
  auto_options_ = options;
  // The footprint now, so the live estimate needs no smaps.
  baseline_rss_.store(procfs::StatmRssBytes());
  baseline_allocated_ = alloc::Allocator::Get().AllocatedBytes();
  baseline_held_ = host_->HeldBytes();
  AutoTrimThread::Hooks hooks;
  hooks.sample = [this](AutoTrimSample* s) { Sample(s); };
  hooks.trim = [this](const std::string& trigger) {
    Release(rsslab::v1::TRIM_MODE_DEFAULT, trigger, kAutoTrimWorkerTimeout);
  };
  auto_trim_ = std::make_unique<AutoTrimThread>(options, std::move(hooks));
  auto_trim_->Start();
}

bool ControlOps::StopAutoTrim(const std::function<void()>& before_join) {
  std::unique_ptr<AutoTrimThread> t;
  {
    absl::MutexLock l(&auto_mu_);
    t = std::move(auto_trim_);
  }
  if (!t) return false;
  if (before_join) before_join();
  t->Stop();
  return true;
}

ControlOps::AutoTrimState ControlOps::auto_trim_state() const {
  AutoTrimState s;
  absl::MutexLock l(&auto_mu_);
  s.on = auto_trim_ != nullptr;
  s.options = auto_options_;
  if (auto_trim_) s.last = auto_trim_->last();
  s.baseline_rss_bytes = baseline_rss_.load();
  return s;
}

}  // namespace rsslab
