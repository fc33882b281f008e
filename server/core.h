// The server's state and behaviour, independent of gRPC: the embedded
// interpreter, the worker pool that runs the handler, the phase, trims and
// snapshots. The gRPC services (load_service, control_service) are thin
// layers over this. The Control operations are ControlOps'
// (control/ops/control_ops.h); the server hosts them (ControlHost): its
// workers, its cache and phase, its Python part of a snapshot.
//
// Example:
//   ServerCore::Options o;            // 4 workers, a 100 MiB cache (see Options)
//   o.handler_path = "server/handlers/web_worker.py";  // required
//   auto core = ServerCore::Create(o);  // imports the handler
//   (*core)->Submit(&request, &response, /*cancelled=*/[] { return false; },
//                   [](const absl::Status& s) { ... });
//   rsslab::v1::Snapshot snap;
//   (*core)->TakeSnapshot({.gc = true}, &snap);
//   ControlService control((*core)->control(), /*max_watch_streams=*/8, &security);
//   (*core)->Shutdown();              // joins workers, finalizes Python

#ifndef RSSLAB_SERVER_CORE_H_
#define RSSLAB_SERVER_CORE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "proto/load.pb.h"
#include "proto/snapshot.pb.h"
#include "common/gil_runner.h"
#include "common/units.h"
#include "common/phase.h"
#include "control/ops/control_ops.h"
#include "control/service/control_backend.h"
#include "control/service/request_check.h"
#include "memory/trim/auto_trim.h"
#include "common/metrics/latency_histogram.h"
#include "server/dispatch.h"
#include "server/phase_state.h"
#include "server/python/runtime.h"
#include "memory/trim/trimmer.h"
#include "server/workers/worker_pool.h"

namespace rsslab {

// How the worker threads live: a fixed pool, or each thread replaced after
// `churn_every` requests (seed 002's executors). Parsed once from
// --thread_mode; "fixed" and "churn" are also what snapshots report.
enum class ThreadMode { kFixed, kChurn };
std::optional<ThreadMode> ParseThreadMode(absl::string_view name);
const char* ThreadModeName(ThreadMode mode);

class ServerCore : private ControlHost {
 public:
  struct Options {
    // Python worker threads (exactly this many run the handler).
    int threads = 4;
    // Handler file exposing handle(request, cache).
    std::string handler_path;
    // Defaults for the handler's params (request params override).
    std::map<std::string, std::string> handler_params;
    // Initial cache limit (100 MiB, seed 000's fill).
    int64_t cache_limit_bytes = kDefaultFillCacheBytes;
    // Largest cache limit a client may set (and where it comes from);
    // larger is INVALID_ARGUMENT.
    CacheCeiling cache_ceiling = {int64_t{64} << 30, "64 GiB"};
    ThreadMode thread_mode = ThreadMode::kFixed;
    int churn_every = 100;
    // Churn: a replaced thread stays alive this long after its successor
    // started, so both hold an arena (seed 002's overlapping executors).
    absl::Duration churn_overlap = absl::Seconds(1);
    // A worker busy longer than this is reported as stuck.
    absl::Duration stuck_after = absl::Seconds(5);
    // Per-request time budget (PythonRuntime::Options::budget); 0 = none.
    absl::Duration handler_budget = absl::ZeroDuration();
    // Shown in snapshots.
    std::string data_address;
    std::string control_address;
    // --auto_trim and its knobs (off by default).
    AutoTrimOptions auto_trim;
    // Who answers Load calls. Unset (the product): the Python handler on a
    // worker holding the GIL (PythonDispatcher, core.cc), behind the request
    // params check and the every-worker-stuck refusal. A caller may supply
    // its own (the benchmark server's, bench/dispatch/); such a dispatcher
    // never calls the handler, so neither of those checks applies to it.
    std::optional<DispatcherFactory> dispatcher;
    // --trim_thread_stats: per-worker allocator figures around each release.
    bool trim_thread_stats = false;
  };

  using SnapshotOptions = ControlSnapshotOptions;

  static absl::StatusOr<std::unique_ptr<ServerCore>> Create(const Options& options);
  ~ServerCore() override;

  using Done = std::function<void(const absl::Status&)>;
  // Runs the handler on a worker; `done` is called on that worker. Refused
  // (FAILED_PRECONDITION) while idle. `response` must outlive `done`.
  void Submit(const rsslab::v1::HandleRequest* request, rsslab::v1::HandleResponse* response,
              std::function<bool()> cancelled, Done done);

  // The Control service's backend (SetPhase, Trim, snapshots): checked
  // calls only (ControlCalls checks). Python is waited for at most each
  // call's python_deadline: the cache is bounded at once (its evicted Python
  // objects released on the Python control thread when the GIL is free),
  // gc is skipped past the deadline (the snapshot's python.unavailable says
  // why), and a trim's per-thread pass waits for each worker at most as
  // long.
  ControlBackend* control() { return ops_.get(); }
  void TakeSnapshot(const SnapshotOptions& options, rsslab::v1::Snapshot* out) {
    ops_->TakeSnapshot(options, out);
  }

  // Refuses new calls (UNAVAILABLE) and waits up to `grace` for the calls
  // already accepted to finish; returns how many are still running.
  int64_t Drain(absl::Duration grace);

  // "rsslab-w3 (tid 1234, busy 12.5 s), ..." for the workers in a call now
  // (what a shutdown that cannot finish names).
  std::string BusyWorkers() const;
  // Handler exceptions by type since start (for metrics).
  std::map<std::string, uint64_t> HandlerErrorsByType() const {
    return runtime_->handler_errors_by_type();
  }

  void set_addresses(const std::string& data, const std::string& control);
  PhaseState& phase() { return phase_; }
  // Time in the handler per request (what response.handler_us reports),
  // for the Prometheus histogram; recorded lock-free by the workers.
  const metrics::LatencyHistogram& handler_latency() const { return handler_latency_; }
  // Trim totals for the Prometheus counters.
  const Trimmer& trimmer() const { return ops_->trimmer(); }

  // Drains and joins the workers, then finalizes Python. Call once, on the
  // thread that called Create().
  void Shutdown();

 private:
  // ControlHost: what ControlOps asks of this server.
  uint64_t LoadCount() override { return phase_.Counters().served; }
  // The cache's bytes: what a long-lived heap legitimately holds above the
  // idle baseline where the allocator keeps no counter (glibc, mimalloc).
  int64_t HeldBytes() override { return runtime_->cache().Counters().bytes; }
  // Phase counters, cache, workers, configuration.
  void FillHostPart(bool detail, rsslab::v1::Snapshot* out) override;
  void FillPythonPart(const SnapshotOptions& options, rsslab::v1::Snapshot* out) override;
  // On rsslab-py0, within the deadline (RunPythonWithin).
  bool CollectGarbage(absl::Duration deadline, std::string* why) override;
  // The cache is bounded at once, without the GIL; its evicted Python
  // objects are released later on rsslab-py0 (ReleaseLater).
  absl::Status EnterPhase(const SetPhaseCall& call, absl::Duration python_deadline,
                          rsslab::v1::SetPhaseResponse* response) override;
  void FillWorkers(bool detail, rsslab::v1::WorkerStats* w) const;
  void FillConfig(rsslab::v1::ServerConfig* cfg) const;
  explicit ServerCore(const Options& options);
  // Releases `dropped` (evicted cache entries) on the control-side Python
  // thread when it gets the GIL; does not wait. gRPC's threads never run
  // Python themselves.
  void ReleaseLater(std::vector<PyObject*> dropped);
  // The same, waiting at most `timeout` for the GIL: false (and `why` set)
  // if `fn` did not run; it then never runs. Behind an earlier call stuck
  // waiting for the GIL past its deadline, returns false at once
  // (common/gil_runner.h).
  bool RunPythonWithin(const std::function<void(PythonRuntime&)>& fn, absl::Duration timeout,
                       std::string* why);

  Options options_;
  const absl::Time start_;
  std::unique_ptr<PythonRuntime> runtime_;
  std::unique_ptr<WorkerPool> workers_;
  // The Python control thread, rsslab-py0.
  std::unique_ptr<GilRunner> py_control_;
  // Phases, trims, the automatic trim and snapshots.
  std::unique_ptr<ControlOps> ops_;
  PhaseState phase_;
  metrics::LatencyHistogram handler_latency_;
  // Calls accepted and not yet answered; draining refuses new ones.
  absl::Mutex inflight_mu_;
  int64_t inflight_ ABSL_GUARDED_BY(inflight_mu_) = 0;
  // Last sign that the workers move: a call finished, or one was accepted
  // while a worker was free. Every worker busy and no progress for
  // stuck_after: new calls are refused (UNAVAILABLE) rather than queued
  // behind a handler that holds the GIL.
  absl::Time last_progress_ ABSL_GUARDED_BY(inflight_mu_) = absl::Now();
  bool draining_ ABSL_GUARDED_BY(inflight_mu_) = false;
  bool shut_down_ = false;
  // Runs accepted calls: the Python dispatcher (core.cc), or the one
  // Options::dispatcher made.
  std::unique_ptr<Dispatcher> dispatcher_;
  // Whether dispatcher_ is the Python dispatcher (calls reach the handler).
  bool runs_handler_ = true;
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_CORE_H_
