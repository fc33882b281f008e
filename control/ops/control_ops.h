// The Control operations of one process, written once: phase changes with
// their cache-limit rules, trims in every mode (the free-block purge
// included), the automatic trim policy with its RSS baselines, and the
// snapshot's assembly. It is the one ControlBackend; rsslab_server
// (server/core.cc) and the Python package (python/native/) host it and
// supply only what is theirs through ControlHost: their threads, their cache
// or on_phase hook, the Python part of a snapshot, their request count.
//
// Example:
//   class MyHost : public ControlHost { ... };
//   MyHost host;
//   ControlOps::Options o;
//   o.threads = &my_thread_set;           // the per-thread pass runs here
//   o.cache_ceiling = MemTotalCeiling();  // SetPhase's largest cache limit
//   ControlOps ops(&host, o);
//   ControlService service(&ops, /*max_watch_streams=*/8, &security);
//   ops.StartAutoTrim(auto_trim_options);  // optional
//   rsslab::v1::TrimResult r =
//       ops.Release(rsslab::v1::TRIM_MODE_DEFAULT, "manual", absl::Seconds(2));
//
// What each mode does, in every host and from every caller (a Control
// call, the automatic trim, the package's release()); common/trim_modes.h
// names them:
//   default     the allocator's global release, then each worker's own;
//               on mimalloc 2.0.x and 3.x each worker then also returns the
//               pages inside its heap's free blocks where a look finds
//               enough resident there (memory/alloc/free_block_purge.h):
//               a release under steady load skips the walk, one after a
//               burst makes it
//   global      the global release only
//   per_thread  each worker's own release only
//   purge       the default's releases, and every worker walks its heap
//               for the free-block purge however little it holds (on
//               other allocators `note` says why it did not run)

#ifndef RSSLAB_CONTROL_OPS_CONTROL_OPS_H_
#define RSSLAB_CONTROL_OPS_CONTROL_OPS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "control/service/control_backend.h"
#include "control/service/request_check.h"
#include "memory/alloc/free_block_purge.h"
#include "memory/trim/auto_trim.h"
#include "memory/trim/thread_set.h"
#include "memory/trim/trimmer.h"
#include "proto/control.pb.h"
#include "proto/snapshot.pb.h"

namespace rsslab {

// What a host supplies. Every method may be called from any thread, the
// GIL not held.
class ControlHost {
 public:
  virtual ~ControlHost() = default;
  // Enters `call.phase` (its cache limit, when >= 0, included) and sets
  // response.previous_phase (and no_callback); an error is the call's
  // answer and nothing else happens. Python waits at most `python_deadline`.
  virtual absl::Status EnterPhase(const SetPhaseCall& call, absl::Duration python_deadline,
                                  rsslab::v1::SetPhaseResponse* response) = 0;
  // gc.collect() within `deadline`; false, with `why`, when it did not run.
  virtual bool CollectGarbage(absl::Duration deadline, std::string* why) = 0;
  // The snapshot's Python part within options.python_deadline (gc first
  // when options.gc; nothing of Python when !options.python): python,
  // gc_duration_us, and what only Python knows in this host.
  virtual void FillPythonPart(const ControlSnapshotOptions& options,
                              rsslab::v1::Snapshot* out) = 0;
  // The host's own sections, no Python: phase and request counters, cache,
  // workers, configuration.
  virtual void FillHostPart(bool detail, rsslab::v1::Snapshot* out) = 0;
  // The automatic trim's load signal: a monotonic count (requests served).
  virtual uint64_t LoadCount() = 0;
  // Bytes the host's heap holds, for the live estimate where the allocator
  // keeps no cheap counter; -1 when the host cannot tell.
  virtual int64_t HeldBytes() = 0;
  // A per-thread pass that ran on no thread: may say why in thread_call.
  virtual void ExplainEmptyPass(rsslab::v1::TrimResult* result) { (void)result; }
};

class ControlOps : public ControlBackend {
 public:
  struct Options {
    // The per-thread pass's threads (the server's WorkerPool, the package's
    // tracked threads); null: no per-thread pass.
    ThreadSet* threads = nullptr;
    // A worker's share of a trim is waited for at most this long (and at
    // most the call's own deadline).
    absl::Duration worker_timeout = absl::Seconds(10);
    // Trimmer's thread_stats and set_follow_up_in_pass.
    bool thread_stats = false;
    bool follow_up_in_pass = false;
    CacheCeiling cache_ceiling = {int64_t{64} << 30, "64 GiB"};
    // When the host started (snapshots' uptime_s).
    absl::Time start = absl::Now();
  };

  ControlOps(ControlHost* host, const Options& options);
  ~ControlOps() override;  // StopAutoTrim()

  // ControlBackend: the calls ControlCalls checked and dispatches.
  CacheCeiling cache_ceiling() const override { return options_.cache_ceiling; }
  absl::Status SetPhase(const SetPhaseCall& call, rsslab::v1::SetPhaseResponse* response,
                        absl::Duration python_deadline) override;
  absl::Status Trim(const TrimCall& call, rsslab::v1::TrimResponse* response,
                    absl::Duration python_deadline) override;
  void TakeSnapshot(const ControlSnapshotOptions& options, rsslab::v1::Snapshot* out) override;

  // One trim: the mode's releases (above), each worker waited for at most
  // `worker_timeout`. A trim not started by the automatic policy tells it
  // (spacing).
  rsslab::v1::TrimResult Release(rsslab::v1::TrimMode mode, const std::string& trigger,
                                 absl::Duration worker_timeout);
  // The purge of the last release that ran one, summed over its workers.
  alloc::FreeBlockPurge last_purge() const;

  // The automatic trim (auto_trim.h) on its own thread, replacing a running
  // one; its baselines (RSS, allocated or held bytes) are taken now. Its
  // trims run the default mode.
  void StartAutoTrim(const AutoTrimOptions& options);
  // False when none was running. `before_join`, if set, runs once the
  // policy is taken and before its thread is joined (the package ends a
  // pass in progress, which would hold the join for its whole deadline).
  bool StopAutoTrim(const std::function<void()>& before_join = nullptr);
  struct AutoTrimState {
    bool on = false;
    AutoTrimOptions options;
    AutoTrimDecision last;
    int64_t baseline_rss_bytes = 0;
  };
  AutoTrimState auto_trim_state() const;

  const Trimmer& trimmer() const { return trimmer_; }

 private:
  void Sample(AutoTrimSample* s);

  ControlHost* const host_;
  const Options options_;
  const absl::Time start_;
  Trimmer trimmer_;
  std::atomic<int64_t> last_rss_after_{0};  // RSS when the last release ended
  mutable absl::Mutex purge_mu_;
  alloc::FreeBlockPurge last_purge_ ABSL_GUARDED_BY(purge_mu_);

  mutable absl::Mutex auto_mu_;  // held while starting, stopping or reading the policy
  std::unique_ptr<AutoTrimThread> auto_trim_ ABSL_GUARDED_BY(auto_mu_);
  AutoTrimOptions auto_options_ ABSL_GUARDED_BY(auto_mu_);
  // Baselines, set by StartAutoTrim before the policy thread starts.
  std::atomic<int64_t> baseline_rss_{0};
  int64_t baseline_allocated_ = -1;
  int64_t baseline_held_ = -1;
};

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_OPS_CONTROL_OPS_H_
