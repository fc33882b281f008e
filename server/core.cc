#include "server/core.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "common/files.h"
#include "common/phase.h"
#include "common/units.h"
#include "server/python/knobs.h"

namespace rsslab {

namespace {

// The product: each call runs handle(request, cache) on a worker thread
// holding the GIL, and calls run in the order they arrived.
//
// A worker takes a call only once it holds the interpreter: which worker
// wins the GIL is up to the OS, so a call bound to a worker before the GIL
// could wait out several switch intervals while later ones were served (a
// GIL convoy; docs/BENCHMARKS.md, "Seed p99"). Picked under the GIL, calls
// run in arrival order whoever wins.
//
// One pool task per call, so calls spread over the workers as the pool
// wakes them. A variant where a worker drained the queue (took the next
// call without a pool round trip, woke others only when needed) saved no
// measurable CPU once the io thread answered without wake-ups, and it
// changed the memory picture at 64 workers (fewer threads did most of the
// allocating: RSS after trim 53-78 MiB against 81-88 before;
// docs/BENCHMARKS.md, "Seed overhead").
class PythonDispatcher : public Dispatcher {
 public:
  PythonDispatcher(WorkerPool* workers, PythonRuntime* runtime, Served served)
      : workers_(workers), runtime_(runtime), served_(served) {}

  void Dispatch(PendingCall call) override {
    queue_.Enqueue(workers_, std::move(call), [this](int worker) { ServeOldest(worker); });
  }

 private:
  void ServeOldest(int worker) {
    PendingCall p;
    absl::Time start;
    absl::Status s;
    bool skipped = false;
    {
      PythonRuntime::Scope scope;
      // A hand-over another worker asked for happens now, before this one
      // picks, not at the handler's first bytecode after.
      runtime_->YieldIfAsked();
      p = queue_.PopOldest();
      start = absl::Now();
      skipped = p.cancelled && p.cancelled();
      if (!skipped) s = runtime_->Handle(*p.request, worker, p.response);
    }
    // Answering (gRPC's write) needs no Python: after the GIL.
    if (skipped) {
      p.done(absl::CancelledError("client cancelled before a worker was free"));
      return;
    }
    served_(p, worker, start, absl::Now(), s);
  }

  WorkerPool* const workers_;
  PythonRuntime* const runtime_;
  const Served served_;
  // Calls accepted and not yet picked by a worker, oldest first.
  PendingQueue queue_;
};

// The options Create refuses, with the flag each one comes from.
absl::Status CheckOptions(const ServerCore::Options& options) {
  if (options.threads < 1 || options.threads > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be between 1 and 4096, got ", options.threads));
  }
  if (options.thread_mode == ThreadMode::kChurn && options.churn_every < 1) {
    return absl::InvalidArgumentError("--thread_mode=churn needs --churn_every >= 1");
  }
  if (options.churn_overlap < absl::ZeroDuration() ||
      options.churn_overlap > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--churn_overlap_ms must be between 0 and 3600000, got ",
                     absl::ToInt64Milliseconds(options.churn_overlap)));
  }
  if (access(options.handler_path.c_str(), R_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("handler file ", options.handler_path, " is missing or unreadable"));
  }
  // CPython reads the file itself: refuse a FIFO (it would hang the import)
  // or a device (it would read without end) here.
  if (absl::Status f = CheckRegularFile(options.handler_path, kHandlerFileMaxBytes, "--handler");
      !f.ok()) {
    return f;
  }
  if (options.handler_budget < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--handler_budget_ms must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<ThreadMode> ParseThreadMode(absl::string_view name) {
  if (name == "fixed") return ThreadMode::kFixed;
  if (name == "churn") return ThreadMode::kChurn;
  return std::nullopt;
}

const char* ThreadModeName(ThreadMode mode) {
  return mode == ThreadMode::kChurn ? "churn" : "fixed";
}

ServerCore::ServerCore(const Options& options) : options_(options), start_(absl::Now()) {}

absl::StatusOr<std::unique_ptr<ServerCore>> ServerCore::Create(const Options& options) {
  if (absl::Status valid = CheckOptions(options); !valid.ok()) return valid;
  std::unique_ptr<ServerCore> core(new ServerCore(options));
  PythonRuntime::Options py;
  py.handler_path = options.handler_path;
  py.default_params = options.handler_params;
  py.cache_limit_bytes = options.cache_limit_bytes;
  py.budget = options.handler_budget;
  py.workers = options.threads;
  absl::StatusOr<std::unique_ptr<PythonRuntime>> rt = PythonRuntime::Start(py);
  if (!rt.ok()) return rt.status();
  core->runtime_ = std::move(*rt);
  PythonRuntime* runtime = core->runtime_.get();

  WorkerPoolOptions w;
  w.threads = options.threads;
  w.name_prefix = "rsslab-w";
  w.churn_every = options.thread_mode == ThreadMode::kChurn ? options.churn_every : 0;
  w.churn_overlap = options.churn_overlap;
  w.on_thread_start = [runtime](int) { runtime->AttachThread(); };
  w.on_thread_exit = [runtime](int) { runtime->DetachThread(); };
  core->workers_ = std::make_unique<WorkerPool>(w);
  core->workers_->Start();

  GilRunnerOptions c;
  c.with_gil = [](const std::function<void()>& fn) {
    PythonRuntime::Scope scope;
    fn();
    return true;
  };
  c.shutting_down_text = "the server is shutting down";
  c.thread_name = "rsslab-py0";
  c.on_thread_start = [runtime] { runtime->AttachThread(); };
  c.on_thread_exit = [runtime] { runtime->DetachThread(); };
  c.who = "the Python control thread";
  c.holder = "a handler";
  ServerCore* raw = core.get();
  c.context = [raw] {
    return absl::StrCat("busy workers: ", raw->BusyWorkers(),
                        "; the sections that need no Python are filled");
  };
  core->py_control_ = std::make_unique<GilRunner>(std::move(c));
  core->py_control_->Start();

  Served served{&core->phase_, &core->handler_latency_};
  if (options.dispatcher) {
    core->dispatcher_ =
        options.dispatcher->make(DispatchContext{core->workers_.get(), &core->phase_, served});
    core->runs_handler_ = false;
    if (core->dispatcher_ == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("dispatcher '", options.dispatcher->name, "' made no dispatcher"));
    }
  } else {
    core->dispatcher_ = std::make_unique<PythonDispatcher>(core->workers_.get(), runtime, served);
  }

  ControlOps::Options ops;
  ops.threads = core->workers_.get();
  ops.thread_stats = options.trim_thread_stats;
  ops.cache_ceiling = options.cache_ceiling;
  ops.start = core->start_;
  core->ops_ = std::make_unique<ControlOps>(static_cast<ControlHost*>(core.get()), ops);
  if (options.auto_trim.mode != AutoTrimOptions::Mode::kOff) {
    absl::Status valid = ValidateAutoTrimOptions(options.auto_trim);
    if (!valid.ok()) return valid;
    // Now, idle: the baseline is the idle server's footprint.
    core->ops_->StartAutoTrim(options.auto_trim);
  }
  return core;
}

ServerCore::~ServerCore() { Shutdown(); }

void ServerCore::set_addresses(const std::string& data, const std::string& control) {
  options_.data_address = data;
  options_.control_address = control;
}

void ServerCore::ReleaseLater(std::vector<PyObject*> dropped) {
  if (dropped.empty()) return;
  auto refs = std::make_shared<std::vector<PyObject*>>(std::move(dropped));
  // Queued before any later Python job of a control call (one thread, in
  // order), so a snapshot taken after it sees the memory released. Not
  // queued only while shutting down, when the interpreter's end frees all.
  py_control_->Post([refs] { PyCache::Release(refs.get()); });
}

bool ServerCore::RunPythonWithin(const std::function<void(PythonRuntime&)>& fn,
                                 absl::Duration timeout, std::string* why) {
  PythonRuntime* rt = runtime_.get();
  return py_control_->RunWithin([&fn, rt] { fn(*rt); }, timeout, why);
}

void ServerCore::Submit(const rsslab::v1::HandleRequest* request,
                        rsslab::v1::HandleResponse* response, std::function<bool()> cancelled,
                        Done done) {
  if (phase_.RefusesLoad()) {
    phase_.CountRefused();
    done(absl::FailedPreconditionError(
        "server is in the idle phase and refuses load; switch to fill or shrink first"));
    return;
  }
  // Declared knob bounds and the generic params limits, before a worker,
  // the GIL or the handler is involved (needs no interpreter).
  if (runs_handler_) {
    if (absl::Status p = runtime_->CheckRequestParams(*request); !p.ok()) {
      phase_.CountRefused();
      done(p);
      return;
    }
  }
  {
    absl::MutexLock lock(&inflight_mu_);
    if (draining_) {
      done(absl::UnavailableError("server is shutting down"));
      return;
    }
    const absl::Time now = absl::Now();
    if (inflight_ < options_.threads) {
      last_progress_ = now;
    } else if (runs_handler_ && now - last_progress_ >= options_.stuck_after) {
      // Every worker is stuck (one holds the GIL in a long C call, the
      // others wait for it): a queued call would only wait out its
      // deadline. Said at once, with what is busy.
      const int64_t inflight = inflight_;
      const absl::Duration since = now - last_progress_;
      inflight_mu_.Unlock();
      phase_.CountRefused();
      done(absl::UnavailableError(absl::StrFormat(
          "every worker is stuck: all %d are busy (%d calls accepted) and none has finished for "
          "%.1f s (a handler may hold the GIL in a long C call); new calls are refused until one "
          "finishes; busy: %s",
          options_.threads, inflight, absl::ToDoubleSeconds(since), BusyWorkers())));
      inflight_mu_.Lock();
      return;
    }
    ++inflight_;
  }
  // Answered exactly once, whichever way the call ends.
  dispatcher_->Dispatch(PendingCall{
      request, response, std::move(cancelled),
      [this, done = std::move(done)](const absl::Status& s) {
        done(s);
        absl::MutexLock lock(&inflight_mu_);
        --inflight_;
        last_progress_ = absl::Now();
      },
      absl::Now()});
}

absl::Status ServerCore::EnterPhase(const SetPhaseCall& call, absl::Duration /*python_deadline*/,
                                    rsslab::v1::SetPhaseResponse* response) {
  if (call.cache_limit_bytes >= 0) {
    // Bounded now, without the GIL (the C++ cache has its own lock); the
    // evicted Python objects are released on the Python control thread,
    // before the snapshot's Python part, once a handler lets the GIL go.
    std::vector<PyObject*> dropped;
    runtime_->cache().ResizeKeeping(call.cache_limit_bytes, &dropped);
    ReleaseLater(std::move(dropped));
  }
  response->set_previous_phase(phase_.Set(call.phase));
  return absl::OkStatus();
}

bool ServerCore::CollectGarbage(absl::Duration deadline, std::string* why) {
  return RunPythonWithin([](PythonRuntime& rt) { rt.Collect(); }, deadline, why);
}

void ServerCore::FillPythonPart(const SnapshotOptions& options, rsslab::v1::Snapshot* out) {
  if (!options.python) return;
  int64_t gc_us = 0;
  rsslab::v1::PythonInfo py;
  std::string why;
  if (RunPythonWithin(
          [&](PythonRuntime& rt) {
            if (options.gc) {
              absl::Time t0 = absl::Now();
              py.set_gc_collected(rt.Collect());
              gc_us = absl::ToInt64Microseconds(absl::Now() - t0);
            }
            rt.FillInfo(&py);
          },
          options.python_deadline, &why)) {
    *out->mutable_python() = std::move(py);
  } else {
    out->mutable_python()->set_unavailable(why);
  }
  out->set_gc_duration_us(gc_us);
}

namespace {

void FillPhase(const PhaseCounters& pc, rsslab::v1::Snapshot* out) {
  out->set_phase(pc.phase);
  out->set_requests_served(pc.served);
  out->set_requests_in_phase(pc.served_in_phase);
  out->set_handler_errors(pc.errors);
  out->set_errors_in_phase(pc.errors_in_phase);
  out->set_requests_refused(pc.refused);
}

void FillCache(const CacheCounters& cc, rsslab::v1::CacheStats* cs) {
  cs->set_cache_entries(cc.entries);
  cs->set_cache_bytes(cc.bytes);
  cs->set_cache_limit_bytes(cc.limit_bytes);
  cs->set_hits(cc.hits);
  cs->set_misses(cc.misses);
  cs->set_evictions(cc.evictions);
  cs->set_puts(cc.puts);
  cs->set_evicted_bytes(cc.evicted_bytes);
}

}  // namespace

void ServerCore::FillWorkers(bool detail, rsslab::v1::WorkerStats* w) const {
  WorkerPoolStats ws = workers_->Stats();
  w->set_configured(ws.configured);
  w->set_thread_mode(ThreadModeName(options_.thread_mode));
  w->set_alive(ws.alive);
  w->set_busy(ws.busy);
  w->set_threads_started(ws.threads_started);
  w->set_lingering(ws.lingering);
  w->set_queue_depth(ws.queue_depth);
  int stuck = 0;
  for (const WorkerInfo& wi : ws.workers) {
    if (wi.busy && wi.busy_for >= options_.stuck_after) ++stuck;
    if (detail || wi.busy) {
      rsslab::v1::WorkerState* s = w->add_workers();
      s->set_worker(wi.worker);
      s->set_tid(wi.tid);
      s->set_busy(wi.busy);
      s->set_busy_for_us(absl::ToInt64Microseconds(wi.busy_for));
      s->set_served(wi.served);
      s->set_generation(wi.generation);
    }
  }
  w->set_stuck(stuck);
}

void ServerCore::FillConfig(rsslab::v1::ServerConfig* cfg) const {
  cfg->set_threads(options_.threads);
  cfg->set_handler(options_.handler_path);
  cfg->set_thread_mode(ThreadModeName(options_.thread_mode));
  cfg->set_churn_every(options_.churn_every);
  cfg->set_churn_overlap_ms(absl::ToInt64Milliseconds(options_.churn_overlap));
  cfg->set_data_address(options_.data_address);
  cfg->set_control_address(options_.control_address);
  cfg->set_dispatch(options_.dispatcher ? options_.dispatcher->name : "python");
  for (const auto& kv : runtime_->effective_params()) {
    (*cfg->mutable_handler_params())[kv.first] = kv.second;
  }
}

void ServerCore::FillHostPart(bool detail, rsslab::v1::Snapshot* out) {
  FillPhase(phase_.Counters(), out);
  FillCache(runtime_->cache().Counters(), out->mutable_cache());
  FillWorkers(detail, out->mutable_workers());
  FillConfig(out->mutable_config());
}

std::string ServerCore::BusyWorkers() const {
  std::string out;
  for (const WorkerInfo& wi : workers_->Stats().workers) {
    if (!wi.busy) continue;
    absl::StrAppendFormat(&out, "%srsslab-w%d (tid %d, busy %.1f s)", out.empty() ? "" : ", ",
                          wi.worker, wi.tid, absl::ToDoubleSeconds(wi.busy_for));
  }
  return out.empty() ? "none busy" : out;
}

int64_t ServerCore::Drain(absl::Duration grace) {
  absl::MutexLock lock(&inflight_mu_);
  draining_ = true;
  inflight_mu_.AwaitWithTimeout(
      absl::Condition(+[](int64_t* n) { return *n == 0; }, &inflight_), grace);
  return inflight_;
}

void ServerCore::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Before the workers: a trim's per-thread pass needs them.
  if (ops_) ops_->StopAutoTrim();
  if (workers_) workers_->Stop();
  if (py_control_) py_control_->Stop(absl::InfiniteDuration());  // before Finalize
  if (runtime_) runtime_->Finalize();
}

}  // namespace rsslab
