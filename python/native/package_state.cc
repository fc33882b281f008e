#include "python/native/package_state.h"

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
#include "python/native/control_server.h"
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

template <typename T>
T Get(const py11::dict& d, const char* key, T fallback) {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return d[key].cast<T>();
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
// shows what a release cannot return (docs/PACKAGE.md, "What stays"). One
// visit per worker per release (each visit is a task queued among the
// service's requests): the follow-up in the same visit. No cap of its own
// on the wait for a worker: release(timeout=) and each call's deadline set
// it.
namespace {
ControlOps::Options OpsOptions(TrackedThreads* threads) {
  ControlOps::Options o;
  o.threads = threads;
  o.worker_timeout = absl::InfiniteDuration();
  o.thread_stats = alloc::Allocator::Get().KeepsPagesWithLiveBlocks();
  o.follow_up_in_pass = true;
  // The process's own MemTotal, as rsslab_server without --max_cache_limit_mb.
  o.cache_ceiling = MemTotalCeiling();
  return o;
}
}  // namespace

PackageState::PackageState() : ops_(this, OpsOptions(&threads_)) {}

void PackageState::ObserveRequest(absl::Duration handler_time, bool error) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  if (error) errors_.fetch_add(1, std::memory_order_relaxed);
  handler_latency_.Observe(handler_time);
}

rsslab::v1::TrimResult PackageState::Release(rsslab::v1::TrimMode mode, absl::Duration timeout,
                                             const std::string& trigger) {
  return ops_.Release(mode, trigger, timeout);
}

void PackageState::ExplainEmptyPass(rsslab::v1::TrimResult* r) {
  // No tracked thread ran the release: say why, rather than an empty call.
  if (r->workers_size() == 0) {
    r->set_thread_call("none (no tracked threads)");
  } else if (threads().last_clean_count() == r->workers_size()) {
    r->set_thread_call("none (no tracked thread served since its last release)");
  }
}

absl::Status PackageState::EnterPhase(const SetPhaseCall& call, absl::Duration python_deadline,
                                      rsslab::v1::SetPhaseResponse* response) {
  return CallPhaseHook(call, python_deadline, response);
}

bool PackageState::CollectGarbage(absl::Duration deadline, std::string* why) {
  return Gil().RunWithin([] { PyGC_Collect(); }, deadline, why);
}

void PackageState::SetSnapshotHook(PyObject* hook) {
  Py_XINCREF(hook);
  Py_XDECREF(snapshot_hook_);
  snapshot_hook_ = hook;
}

bool PackageState::RunSnapshotHook(bool gc, absl::Duration deadline, rsslab::v1::Snapshot* out,
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

void PackageState::FillPythonPart(const ControlSnapshotOptions& options,
                                  rsslab::v1::Snapshot* out) {
  std::string why;
  if (options.python && RunSnapshotHook(options.gc, options.python_deadline, out, &why)) {
    absl::MutexLock l(&seen_mu_);
    if (!out->phase().empty()) seen_phase_ = out->phase();
    seen_workers_ = out->workers();
    return;
  }
  if (options.python) out->mutable_python()->set_unavailable(why);
  absl::MutexLock l(&seen_mu_);
  out->set_phase(seen_phase_);
  *out->mutable_workers() = seen_workers_;
}

void PackageState::FillHostPart(bool /*detail*/, rsslab::v1::Snapshot* out) {
  out->set_requests_served(requests());
  out->set_handler_errors(handler_errors());
}

uint64_t PackageState::LoadCount() {
  const uint64_t req = requests();
  if (!on_requests_.load() && !counting_cpu_.load() && req > 0) {
    // "auto": the first counted request switches the signal, continuing
    // from the last CPU figure so the policy sees a monotonic count.
    on_requests_.store(true);
    load_offset_ = last_load_;
  }
  last_load_ = on_requests_.load() ? load_offset_ + req : ProcessCpuMillis();
  return last_load_;
}

// glibc: mallinfo2 (a short walk of the arenas, five times a second); the
// other allocators' counters are ControlOps' own (-1 for mimalloc, whose
// release builds keep none).
int64_t PackageState::HeldBytes() { return alloc::Allocator::Get().InUseBytesByWalk(); }

void PackageState::StartAutoTrim(const AutoTrimOptions& options, const std::string& signal) {
  StopAutoTrim();
  on_requests_.store(signal == "requests");
  // "cpu" never switches; "auto" switches on the first counted request.
  counting_cpu_.store(signal == "cpu");
  load_offset_ = 0;
  last_load_ = 0;
  ScopedAsyncSignalsBlocked blocked;  // its thread never runs the process's handlers
  ops_.StartAutoTrim(options);
}

void PackageState::StopAutoTrim() {
  // A pass in progress would hold the join for its whole deadline.
  const bool stopped = ops_.StopAutoTrim([this] {
    threads_.Refuse(true);
    threads_.Abort();
  });
  if (stopped) threads_.Refuse(false);
}

py11::dict PackageState::AutoTrimInfo() {
  py11::dict d;
  const ControlOps::AutoTrimState st = ops_.auto_trim_state();
  d["mode"] = AutoTrimModeName(st.on ? st.options.mode : AutoTrimOptions::Mode::kOff);
  if (!st.on) return d;
  d["signal"] = on_requests_.load() ? "requests" : "cpu";
  d["rate"] = st.last.rate;
  d["peak_rate"] = st.last.peak_rate;
  d["gap_bytes"] = st.last.gap_bytes;
  d["load_dropped"] = st.last.low;
  d["armed"] = st.last.armed;
  d["baseline_rss_bytes"] = st.baseline_rss_bytes;
  d["auto_trims"] = trimmer().auto_count();
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
