// The package's process-wide state, and its host of the Control operations
// (control/ops/control_ops.h: phases, trims, the automatic trim, snapshots,
// the same code as rsslab_server's): the tracked threads, the automatic
// trim's load signal, the request counter, the on_phase and snapshot hooks
// into Python. One instance (State()), created on import and stopped by the
// package's atexit handler before finalization.
//
// Example:
//   rsslab::v1::TrimResult r = State().Release(rsslab::v1::TRIM_MODE_DEFAULT,
//                                              absl::Seconds(2), "manual");
//   rsslab::v1::Snapshot s;
//   State().TakeSnapshot(ControlSnapshotOptions{}, &s);

#ifndef RSSLAB_PYTHON_NATIVE_PACKAGE_STATE_H_
#define RSSLAB_PYTHON_NATIVE_PACKAGE_STATE_H_

#include <Python.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/latency_histogram.h"
#include "memory/alloc/free_block_purge.h"
#include "control/ops/control_ops.h"
#include "control/service/control_backend.h"
#include "memory/trim/auto_trim.h"
#include "memory/trim/trimmer.h"
#include "proto/snapshot.pb.h"
#include "python/native/tracked_threads.h"

namespace rsslab {
namespace py {

class PackageState : private ControlHost {
 public:
  PackageState();

  TrackedThreads& threads() { return threads_; }
  const Trimmer& trimmer() const { return ops_.trimmer(); }
  // The Control service's backend.
  ControlBackend* control() { return &ops_; }

  // rsslab.release(): any thread, GIL not held. The per-thread part waits
  // at most `timeout`; the mode means what it means to a Control call.
  rsslab::v1::TrimResult Release(rsslab::v1::TrimMode mode, absl::Duration timeout,
                                 const std::string& trigger);
  // Any thread, GIL not held. The Python part (through the hook) waits at
  // most options.python_deadline for the GIL, as the server's does; past it
  // python.unavailable says why and the rest is filled. python = false:
  // none at all (/metrics), the last phase and workers seen are used.
  void TakeSnapshot(const ControlSnapshotOptions& options, rsslab::v1::Snapshot* out) {
    ops_.TakeSnapshot(options, out);
  }

  void CountRequests(uint64_t n) { requests_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t requests() const { return requests_.load(std::memory_order_relaxed); }
  // The free-block purge of the last release that ran one (mimalloc's
  // default, or mode purge; on each tracked thread after its collect;
  // free_block_purge.h), summed.
  alloc::FreeBlockPurge last_purge() const { return ops_.last_purge(); }

  // One request the interceptor timed (its handler's time, queueing
  // excluded): counted, and in the latency histogram /metrics serves.
  void ObserveRequest(absl::Duration handler_time, bool error);
  metrics::LatencyHistogram::Counts HandlerLatency() const { return handler_latency_.Read(); }
  uint64_t handler_errors() const { return errors_.load(std::memory_order_relaxed); }

  int64_t arena_cap() const { return arena_cap_.load(); }
  void set_arena_cap(int64_t n) { arena_cap_.store(n); }

  // signal: "requests" | "cpu" | "auto" (requests once any was counted,
  // process CPU time before). GIL not held. Replaces a running policy.
  void StartAutoTrim(const AutoTrimOptions& options, const std::string& signal);
  void StopAutoTrim();
  pybind11::dict AutoTrimInfo();  // GIL held

  // GIL held. hook(gc: bool) -> dict (see rsslab/_phases.py, _snapshot_part).
  void SetSnapshotHook(PyObject* hook);
  // Stops the native threads; GIL not held. Then ClearHooks() with the GIL.
  void Shutdown();
  // fork(): the child has none of the parent's threads, and any of the
  // state's locks may have been held by one of them at the fork (a release,
  // a snapshot, a Control call in flight). The child takes no lock and
  // releases none: State() becomes a fresh PackageState carrying only the
  // hooks Python registered and the arena cap (its counters and trim
  // history start at the fork, with no automatic trim); the parent's is
  // leaked, untouched. The GIL helper starts afresh when first needed.
  // Registered once, at import, before the package starts any thread.
  static void RegisterForkHandlers();
  // The child handler's half: State()'s replacement. Reads only what
  // Python set at import (no lock guards it).
  static void ReplaceInForkedChild();
  void ClearHooks();

 private:
  // ControlHost: what ControlOps asks of the package.
  absl::Status EnterPhase(const SetPhaseCall& call, absl::Duration python_deadline,
                          rsslab::v1::SetPhaseResponse* response) override;
  bool CollectGarbage(absl::Duration deadline, std::string* why) override;
  void FillPythonPart(const ControlSnapshotOptions& options, rsslab::v1::Snapshot* out) override;
  void FillHostPart(bool detail, rsslab::v1::Snapshot* out) override;
  uint64_t LoadCount() override;
  int64_t HeldBytes() override;
  void ExplainEmptyPass(rsslab::v1::TrimResult* r) override;
  // False (with `why`) when the GIL was not had within `deadline`.
  bool RunSnapshotHook(bool gc, absl::Duration deadline, rsslab::v1::Snapshot* out,
                       std::string* why);

  TrackedThreads threads_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> errors_{0};
  metrics::LatencyHistogram handler_latency_;
  // The Python part's last phase and worker figures, for snapshots taken
  // without Python (/metrics never waits for the GIL).
  absl::Mutex seen_mu_;
  std::string seen_phase_ ABSL_GUARDED_BY(seen_mu_) = "start";
  rsslab::v1::WorkerStats seen_workers_ ABSL_GUARDED_BY(seen_mu_);
  std::atomic<int64_t> arena_cap_{0};
  PyObject* snapshot_hook_ = nullptr;  // GIL held to touch

  // The automatic trim's load signal (LoadCount), touched by the policy
  // thread only (and StartAutoTrim, while no policy runs).
  uint64_t last_load_ = 0;
  uint64_t load_offset_ = 0;
  std::atomic<bool> on_requests_{false};
  std::atomic<bool> counting_cpu_{true};

  // Last: built over the members above, and stopped before they go.
  ControlOps ops_;
};

PackageState& State();

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_PACKAGE_STATE_H_
