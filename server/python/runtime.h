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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/load.pb.h"
#include "proto/snapshot.pb.h"
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
    int64_t cache_limit_bytes = 100 << 20;
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
  // INTERNAL status whose message is "<ExceptionType>: <message>".
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

  // Drops the cache's objects and finalizes the interpreter, on the thread
  // that called Start(), after every other attached thread detached.
  void Finalize();

 private:
  explicit PythonRuntime(const Options& options);
  absl::Status Import();
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
  bool finalized_ = false;
};

// "<type>: <message>" for the pending Python exception, clearing it; the
// traceback goes to stderr when `print_traceback` is set.
std::string TakePythonError(bool print_traceback);

}  // namespace rsslab

#endif  // RSSLAB_SERVER_PYTHON_RUNTIME_H_
