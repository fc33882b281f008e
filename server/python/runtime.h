// The embedded CPython interpreter: started once, finalized once, and the
// only place that knows how threads attach to it.
//
// Start() runs on the main thread, imports the handler file, and releases
// the interpreter. Each worker thread calls AttachThread() once when it
// starts (it gets one thread state for its whole life, not one per request)
// and DetachThread() before it exits. Python code then runs inside
// `PythonRuntime::Scope`, which holds the GIL on GIL builds.
//
// Example:
//   PythonRuntime::Options o;
//   o.handler_path = "server/handlers/web_worker.py";
//   auto rt = PythonRuntime::Start(o);           // on main
//   // worker thread:
//   rt->AttachThread();
//   { PythonRuntime::Scope py; rt->Handle(req, worker, &resp); }
//   rt->DetachThread();
//   // main, after the workers are joined:
//   rt->Finalize();

#ifndef RSSLAB_SERVER_PYTHON_RUNTIME_H_
#define RSSLAB_SERVER_PYTHON_RUNTIME_H_

#include <Python.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/load.pb.h"
#include "proto/snapshot.pb.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/units.h"
#include "common/phase.h"
#include "server/python/error_log.h"
#include "server/python/knobs.h"
#include "server/python/py_cache.h"

namespace rsslab {

class PythonRuntime {
 public:
  struct Options {
    // A .py file exposing handle(request, cache).
    std::string handler_path;
    // Merged under each request's params (the request's own win).
    std::map<std::string, std::string> default_params;
    // Initial cache limit in bytes.
    int64_t cache_limit_bytes = kDefaultFillCacheBytes;
    // Per-request time budget (0 = none): a handler call running longer
    // gets HandlerBudgetExceeded raised inside it (a BaseException, so
    // `except Exception` does not swallow it) and the call fails with
    // DEADLINE_EXCEEDED. Python code only: a call blocked in C (a sleep, a
    // huge allocation) is interrupted when it returns to Python.
    absl::Duration budget = absl::ZeroDuration();
    // Worker indexes passed to Handle() are below this (budget slots).
    int workers = 0;
  };

  // Starts the interpreter and imports the handler. On failure the error
  // names the path and carries the Python traceback.
  static absl::StatusOr<std::unique_ptr<PythonRuntime>> Start(const Options& options);

  ~PythonRuntime();

  // Attaches the calling OS thread (once per thread).
  void AttachThread();
  void DetachThread();

  // Holds the interpreter for this (attached) thread while in scope.
  class Scope {
   public:
    Scope();
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  // Inside a Scope: runs the handler. A Python exception becomes an
  // INTERNAL status whose message is "<ExceptionType>: <message>"; that
  // includes SystemExit, KeyboardInterrupt and every other BaseException
  // (they fail this call only; the server keeps serving). os._exit() in a
  // handler cannot be intercepted: it ends the process.
  absl::Status Handle(const rsslab::v1::HandleRequest& request, int worker,
                      rsslab::v1::HandleResponse* response);

  // Inside a Scope: hands the GIL over if another thread has asked for it
  // (after waiting a switch interval), by running one no-op Python function
  // whose first bytecode services that request. The dispatcher calls it
  // right before it picks a call, so the hand-over happens there and not
  // at the handler's first bytecode, after the call was picked.
  void YieldIfAsked();

  // Inside a Scope: gc.collect(), returns the number collected.
  int64_t Collect();
  // Inside a Scope: version, allocated blocks, gc counts, GIL state.
  void FillInfo(rsslab::v1::PythonInfo* info);

  PyCache& cache() { return cache_; }
  // The handler's DEFAULTS (when it has one) with the server's params over
  // them, as strings: what a request without params of its own gets.
  // Fixed once Start() returned.
  const std::map<std::string, std::string>& effective_params() const { return effective_params_; }
  // The C accelerators checked at start (kAccelerators), in that order.
  struct Accelerator {
    std::string name;
    std::string origin;  // a file path, "built-in", or "missing: <error>"
    bool loaded = false;
  };
  const std::vector<Accelerator>& accelerators() const { return accelerators_; }
  // The accelerator modules the shipped handlers need: json's _json (its
  // pure-Python fallback costs several times as much per request), and
  // random's _random and math (built into Debian's interpreter).
  static constexpr const char* kAccelerators[] = {"_json", "_random", "math"};
  const std::string& handler_path() const { return handler_path_; }
  uint64_t handler_errors() const { return handler_errors_.load(); }
  // Handler exceptions by type name (for metrics).
  std::map<std::string, uint64_t> handler_errors_by_type() const { return error_log_.Totals(); }
  // The handler's declared KNOBS (empty when it declares none).
  const KnobTable& knobs() const { return knobs_; }
  // Checks a request's params against the knobs and the generic limits;
  // needs no interpreter (called on gRPC's threads).
  absl::Status CheckRequestParams(const rsslab::v1::HandleRequest& request) const {
    return CheckParams(knobs_, request.params());
  }

  // Drops the cache's objects and finalizes the interpreter, on the thread
  // that called Start(), after every other attached thread detached.
  void Finalize();

 private:
  explicit PythonRuntime(const Options& options);
  absl::Status Import();
  // KNOBS (and DEFAULTS against it) from the imported module.
  absl::Status ReadKnobs(PyObject* module);
  // Per-request budget: the watcher thread and each worker's current call.
  void StartBudget();
  void StopBudget();
  void BudgetLoop();
  // Under the GIL, around the handler call.
  void BeginCall(int worker);
  // True when the budget fired for this call.
  bool EndCall(int worker);
  // Imports each of kAccelerators and records where it came from.
  void CheckAccelerators();

  std::string handler_path_;
  std::map<std::string, std::string> default_params_;
  std::map<std::string, std::string> effective_params_;
  std::vector<Accelerator> accelerators_;
  PyCache cache_;
  PyThreadState* main_state_ = nullptr;
  PyObject* handle_fn_ = nullptr;
  PyObject* cache_module_ = nullptr;
  PyObject* gc_collect_ = nullptr;
  PyObject* noop_fn_ = nullptr;
  PyObject* gc_get_count_ = nullptr;
  PyObject* gil_enabled_fn_ = nullptr;
  PyObject* allocated_blocks_fn_ = nullptr;
  std::atomic<uint64_t> handler_errors_{0};
  HandlerErrorLog error_log_;
  KnobTable knobs_;
  absl::Duration budget_ = absl::ZeroDuration();
  struct CallSlot {
    // When the current call started (0: idle), read by the watcher without
    // the GIL; `ident`, `seq` and `fired` are only touched under the GIL.
    std::atomic<int64_t> start_ns{0};
    unsigned long ident = 0;
    uint64_t seq = 0;
    bool fired = false;
  };
  std::unique_ptr<CallSlot[]> slots_;
  int num_slots_ = 0;
  PyObject* budget_exc_ = nullptr;
  std::thread budget_thread_;
  absl::Notification budget_stop_;
  bool finalized_ = false;
};

// "<type>: <message>" for the pending Python exception, clearing it; the
// traceback goes to stderr when `print_traceback` is set. Never exits the
// process, whatever the exception (PyErr_Print would, on SystemExit). The
// message is cut to 1 KiB. `type_name` (optional) receives the type's name.
std::string TakePythonError(bool print_traceback, std::string* type_name = nullptr);

}  // namespace rsslab

#endif  // RSSLAB_SERVER_PYTHON_RUNTIME_H_
