#include "python/native/package_state.h"

#include <malloc.h>
#include <pthread.h>
#include <pybind11/stl.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "common/thread_signals.h"
#include "memory/alloc/alloc.h"
#include "memory/snapshot/process_snapshot.h"
#include "python/native/gil_runner.h"

namespace py11 = pybind11;

namespace rsslab {
namespace py {
namespace {

uint64_t ProcessCpuMillis() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec / 1000000);
}

// Bytes the program holds: the allocator's own counter where it is cheap
// (jemalloc, tcmalloc), glibc's mallinfo2 (a short walk of the arenas, five
// times a second), -1 for mimalloc (release builds keep no counter).
int64_t AllocatedNow() {
  const alloc::Allocator& a = alloc::Allocator::Get();
  if (a.name() == "glibc") {
    struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
  }
  return a.AllocatedBytes();
}

template <typename T>
T Get(const py11::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
}

// A worker's block walk (free_block_purge.h) runs only when a look at its
// walkable pages finds at least this much resident in their free blocks: a
// release every 2 s under steady load finds less on almost every worker
// and skips the walk, which visits every block of the heap; a release
// after a burst finds megabytes. At 64 workers what a skip can leave
// behind is at most 64 x 256 KiB.
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

int64_t PurgeThresholdThisThread(bool after_burst) {
  if (after_burst) return kPurgeMinResidentBytes;
  return absl::Now() - t_last_walk < kPurgeSpacing ? kPurgeSoonAgainBytes
                                                   : kPurgeMinResidentBytes;
}

void NoteWalkThisThread(const alloc::FreeBlockPurge& p) {
  if (p.ran && !p.skipped) t_last_walk = absl::Now();
}

}  // namespace

namespace {

// Never destroyed: native threads may still look at it while the process
// exits after a failed shutdown. A forked child points it at a fresh one
// (PackageState::ReplaceInForkedChild).
PackageState*& StateSlot() {
  static PackageState* s = new PackageState();
  return s;
}

}  // namespace

PackageState& State() { return *StateSlot(); }

// mimalloc: each worker's heap is measured right before and after its
// release (WorkerTrim.before/after: committed against used bytes), which
// shows what a release cannot return (docs/PACKAGE.md, "What stays").
PackageState::PackageState()
    : start_(absl::Now()),
      trimmer_(&threads_, absl::Seconds(10),
               /*thread_stats=*/alloc::Allocator::Get().name() == "mimalloc") {
  // One visit per worker per release (each visit is a task queued among
  // the service's requests).
  trimmer_.set_follow_up_in_pass(true);
}

alloc::FreeBlockPurge PackageState::last_purge() {
  absl::MutexLock l(&purge_mu_);
  return last_purge_;
}

void PackageState::ObserveRequest(absl::Duration handler_time, bool error) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (error) errors_.fetch_add(1, std::memory_order_relaxed);
  handler_latency_.Observe(handler_time);
}

rsslab::v1::TrimResult PackageState::Release(rsslab::v1::TrimMode mode, absl::Duration timeout,
                                             const std::string& trigger) {
  // mimalloc (2.0.x, 3.x) returns a page only with its last live block; the
  // purge returns the pages inside its free blocks, on each tracked thread
  // right after that thread's collect (free_block_purge.h).
  const bool purge = alloc::Allocator::Get().name() == "mimalloc" &&
                     mode != rsslab::v1::TRIM_GLOBAL_ONLY;
  const int64_t rss = StatmRssBytes();
  const int64_t last = last_rss_after_.load();
  const bool after_burst = last <= 0 || rss - last >= std::min<int64_t>(kBurstGrowth, last / 2);
  auto sum = std::make_shared<alloc::PurgeTotal>();
  std::function<void()> purge_step;
  if (purge) {
    purge_step = sum->Step([after_burst] { return PurgeThresholdThisThread(after_burst); },
                           NoteWalkThisThread);
  }
  TrackedThreads::SetCallTimeout(timeout);
  // The purge before each worker's after-figures, so they show what stays.
  rsslab::v1::TrimResult r =
      trimmer_.Run(mode, trigger, absl::InfiniteDuration(), std::move(purge_step));
  TrackedThreads::SetCallTimeout(absl::InfiniteDuration());
  // No tracked thread ran the release: say why, rather than an empty call.
  if (r.per_thread() && r.thread_call().empty()) {
    if (r.workers_size() == 0) {
      r.set_thread_call("none (no tracked threads)");
    } else if (threads().last_clean_count() == r.workers_size()) {
      r.set_thread_call("none (no tracked thread served since its last release)");
    }
  }
  last_rss_after_.store(StatmRssBytes());
  if (purge) {
    sum->ToProto(r.mutable_free_block_purge());
    absl::MutexLock pl(&purge_mu_);
    last_purge_ = sum->Get();
  }
  if (trigger.rfind("auto", 0) != 0) {
    absl::MutexLock l(&auto_mu_);
    if (auto_trim_) auto_trim_->NoteTrim(absl::Now());
  }
  return r;
}

void PackageState::SetSnapshotHook(PyObject* hook) {
  Py_XINCREF(hook);
  Py_XDECREF(snapshot_hook_);
  snapshot_hook_ = hook;
}

bool PackageState::FillPythonPart(bool gc, absl::Duration deadline, rsslab::v1::Snapshot* out,
                                  std::string* why) {
  return Gil().RunWithin([&] {
    if (snapshot_hook_ == nullptr) return;
    try {
      py11::object r = py11::reinterpret_borrow<py11::object>(snapshot_hook_)(gc);
      py11::dict d = r.cast<py11::dict>();
      out->set_phase(Get<std::string>(d, "phase", "start"));
      out->set_gc_duration_us(Get<int64_t>(d, "gc_duration_us", 0));
      if (d.contains("python")) {
        py11::dict p = d["python"].cast<py11::dict>();
        rsslab::v1::PythonInfo* pi = out->mutable_python();
        pi->set_version(Get<std::string>(p, "version", ""));
        pi->set_allocated_blocks(Get<int64_t>(p, "allocated_blocks", 0));
        for (int64_t c : Get<std::vector<int64_t>>(p, "gc_counts", {})) pi->add_gc_counts(c);
        pi->set_gc_collected(Get<int64_t>(p, "gc_collected", 0));
        pi->set_gil_enabled(true);
        pi->set_executable(Get<std::string>(p, "executable", ""));
      }
      if (d.contains("cache") && !d["cache"].is_none()) {
        py11::dict c = d["cache"].cast<py11::dict>();
        rsslab::v1::CacheStats* cs = out->mutable_cache();
        cs->set_cache_entries(Get<int64_t>(c, "entries", 0));
        cs->set_cache_bytes(Get<int64_t>(c, "bytes", 0));
        cs->set_cache_limit_bytes(Get<int64_t>(c, "limit_bytes", 0));
        cs->set_evictions(Get<int64_t>(c, "evictions", 0));
        cs->set_puts(Get<int64_t>(c, "puts", 0));
        cs->set_hits(Get<int64_t>(c, "hits", 0));
        cs->set_misses(Get<int64_t>(c, "misses", 0));
        cs->set_evicted_bytes(Get<int64_t>(c, "evicted_bytes", 0));
      }
      if (d.contains("workers")) {
        py11::dict w = d["workers"].cast<py11::dict>();
        out->mutable_workers()->set_configured(Get<int>(w, "configured", 0));
        out->mutable_workers()->set_alive(Get<int>(w, "alive", 0));
        out->mutable_workers()->set_thread_mode("tracked");
      }
      out->mutable_config()->set_control_address(Get<std::string>(d, "control_address", ""));
      out->mutable_config()->set_threads(Get<int>(d, "threads", 0));
    } catch (py11::error_already_set& e) {
      std::fprintf(stderr, "rsslab: the snapshot's Python part raised: %s\n", e.what());
    } catch (py11::cast_error& e) {
      std::fprintf(stderr, "rsslab: the snapshot's Python part: %s\n", e.what());
    }
  }, deadline, why);
}

void PackageState::TakeSnapshot(const ControlSnapshotOptions& options,
                                rsslab::v1::Snapshot* out) {
  // First: a gc.collect() changes the rest.
  std::string why;
  if (options.python && FillPythonPart(options.gc, options.python_deadline, out, &why)) {
    absl::MutexLock l(&seen_mu_);
    if (!out->phase().empty()) seen_phase_ = out->phase();
    seen_workers_ = out->workers();
  } else {
    if (options.python) out->mutable_python()->set_unavailable(why);
    absl::MutexLock l(&seen_mu_);
    out->set_phase(seen_phase_);
    *out->mutable_workers() = seen_workers_;
  }
  const absl::Time t0 = absl::Now();
  ProcessSnapshotOptions o;
  o.detail = options.detail;
  FillProcessSnapshot(o, out);
  out->set_uptime_s(absl::ToDoubleSeconds(t0 - start_));
  out->set_requests_served(requests());
  out->set_handler_errors(handler_errors());
  FillTrimHistory(trimmer_, out);
  {
    absl::MutexLock l(&auto_mu_);
    out->mutable_config()->set_auto_trim(
        AutoTrimModeName(auto_trim_ ? auto_options_.mode : AutoTrimOptions::Mode::kOff));
    if (auto_trim_) {
      FillAutoTrimState(auto_trim_->last(), auto_options_, baseline_rss_,
                        out->mutable_auto_trim());
    }
  }
  out->set_snapshot_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
}

void PackageState::Sample(AutoTrimSample* s) {
  const uint64_t req = requests();
  if (!on_requests_ && !counting_cpu_.load() && req > 0) {
    // "auto": the first counted request switches the signal, continuing
    // from the last CPU figure so the policy sees a monotonic count.
    on_requests_ = true;
    load_offset_ = last_load_;
  }
  last_load_ = on_requests_ ? load_offset_ + req : ProcessCpuMillis();
  s->requests = last_load_;
  s->rss_bytes = StatmRssBytes();
  const int64_t allocated = AllocatedNow();
  s->live_bytes = baseline_rss_;
  if (allocated >= 0 && baseline_allocated_ >= 0) {
    s->live_bytes += std::max<int64_t>(0, allocated - baseline_allocated_);
  }
}

void PackageState::StartAutoTrim(const AutoTrimOptions& options, const std::string& signal) {
  StopAutoTrim();
  absl::MutexLock l(&auto_mu_);
  auto_options_ = options;
  signal_ = signal;
  baseline_rss_ = StatmRssBytes();
  baseline_allocated_ = AllocatedNow();
  on_requests_ = signal == "requests";
  // "cpu" never switches; "auto" switches on the first counted request.
  counting_cpu_.store(signal == "cpu");
  load_offset_ = 0;
  last_load_ = 0;
  AutoTrimThread::Hooks hooks;
  hooks.sample = [this](AutoTrimSample* s) { Sample(s); };
  hooks.trim = [this](const std::string& trigger) {
    Release(rsslab::v1::TRIM_MODE_DEFAULT, absl::Seconds(2), trigger);
  };
  auto_trim_ = std::make_unique<AutoTrimThread>(options, std::move(hooks));
  ScopedAsyncSignalsBlocked blocked;  // its thread never runs the process's handlers
  auto_trim_->Start();
}

void PackageState::StopAutoTrim() {
  std::unique_ptr<AutoTrimThread> t;
  {
    absl::MutexLock l(&auto_mu_);
    t = std::move(auto_trim_);
  }
  if (!t) return;
  // A pass in progress would hold the join for its whole deadline.
  threads_.Refuse(true);
  threads_.Abort();
  t->Stop();
  threads_.Refuse(false);
}

py11::dict PackageState::AutoTrimInfo() {
  py11::dict d;
  absl::MutexLock l(&auto_mu_);
  d["mode"] = AutoTrimModeName(auto_trim_ ? auto_options_.mode : AutoTrimOptions::Mode::kOff);
  if (!auto_trim_) return d;
  d["signal"] = on_requests_ ? "requests" : "cpu";
  AutoTrimDecision last = auto_trim_->last();
  d["rate"] = last.rate;
  d["peak_rate"] = last.peak_rate;
  d["gap_bytes"] = last.gap_bytes;
  d["load_dropped"] = last.low;
  d["armed"] = last.armed;
  d["baseline_rss_bytes"] = baseline_rss_;
  d["auto_trims"] = trimmer_.auto_count();
  return d;
}

void PackageState::Shutdown() {
  threads_.Refuse(true);
  threads_.Abort();
  StopAutoTrim();
  threads_.Refuse(true);
}

namespace {

void ChildAfterFork() {
  PackageState::ReplaceInForkedChild();
  // The GIL helper's thread is the parent's too: a fresh runner starts its
  // own on first use (jobs would otherwise wait for a thread that is not
  // in this process).
  Gil().AfterForkInChild();
}

}  // namespace

void PackageState::RegisterForkHandlers() {
  static const int once = [] {
    // Debian's Abseil is built with Mutex deadlock detection on: every
    // Lock and Unlock of any absl::Mutex then passes through one global
    // spin lock, which another thread (ours, or gRPC's) may hold at the
    // moment of a fork; the child's first Mutex call would then spin
    // forever. The package's locks are never held two at a time, so the
    // check buys nothing (rsslab_server turns it off too). Off before the
    // package starts a thread; the wheel's Abseil is the package's own copy.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    // No prepare or parent handler: the parent never waits for a lock.
    return pthread_atfork(nullptr, nullptr, ChildAfterFork);
  }();
  (void)once;
}

void PackageState::ReplaceInForkedChild() {
  const PackageState& parent = State();
  auto* fresh = new PackageState();
  // Set at import with the GIL, read here by the only thread left.
  fresh->threads_.SetHooks(parent.threads_.targets_hook(), parent.threads_.submit_hook());
  fresh->snapshot_hook_ = parent.snapshot_hook_;
  Py_XINCREF(fresh->snapshot_hook_);
  fresh->arena_cap_.store(parent.arena_cap_.load());
  StateSlot() = fresh;  // the parent's is leaked: its locks are never touched
}

void PackageState::ClearHooks() {
  threads_.Close();
  Py_CLEAR(snapshot_hook_);
}

}  // namespace py
}  // namespace rsslab
