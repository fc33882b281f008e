// rsslab.serve(): the Control service (control/service, the same code as
// rsslab_server's) inside the Python process, over a backend made of the
// package's state: snapshots and trims as the server's, phases through the
// callbacks the service registered with rsslab.on_phase().
//
// Two transports, one set of rules (control/service/control_calls.h):
// native, a gRPC C++ server of its own; grpcio, the service's own grpcio
// listens (rsslab/_control_grpcio.py) and hands each call's bytes here.
//
// Example (GIL not held):
//   absl::StatusOr<std::string> addr = StartControl("127.0.0.1:0", "");
//   ...
//   StopControl();  // atexit: ends watch streams, shuts the server down
// Example, grpcio (GIL not held around CallControl):
//   OpenControlCalls("127.0.0.1:0", "");  // checks, does not listen
//   ... grpcio binds port P ...
//   absl::StatusOr<std::string> addr = ControlCallsBound(P);
//   std::string out;
//   absl::Status s = CallControl("GetSnapshot", bytes, nullptr, deadline, &out);

#ifndef RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_
#define RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_

#include <Python.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "control/service/control_calls.h"

namespace rsslab {
namespace py {

// GIL held. hook(phase: str, limit_bytes: int) -> previous phase (str);
// raises LookupError when nothing is registered for the phase.
void SetPhaseHook(PyObject* hook);
void ClearPhaseHook();

// Listens on `address` (host:port, port 0 = any free one); returns the
// bound host:port. `token_file`: callers must send its token (empty: none).
// A second call while one runs is an error.
absl::StatusOr<std::string> StartControl(const std::string& address,
                                         const std::string& token_file);
// Idempotent; bounded (about a second). Either transport; for grpcio it
// ends the watch streams (the Python side stops its server).
void StopControl();

// Ends the grpcio transport's watch streams, and any opened later, at once
// (interpreter shutdown: they run on executor threads that Python joins
// before atexit). No-op for the native transport.
void EndControlWatches();

// The grpcio transport. OpenControlCalls checks `address` and `token_file`
// as StartControl does but does not listen; ControlCallsBound records the
// port grpcio bound and returns host:port.
absl::Status OpenControlCalls(const std::string& address, const std::string& token_file);
absl::StatusOr<std::string> ControlCallsBound(int port);

// One watch stream of the grpcio transport; `calls` keeps the rules alive
// for as long as the stream (declared first: destroyed last).
struct ControlWatchHandle {
  std::shared_ptr<ControlCalls> calls;
  std::unique_ptr<ControlCalls::Watch> watch;
};

// GIL not held. `authorization`: the call's "authorization" header, nullptr
// if it has none. UNAVAILABLE when no grpcio transport is open.
absl::Status CallControl(const std::string& method, const std::string& request,
                         const std::string* authorization, absl::Time call_deadline,
                         std::string* response);
absl::StatusOr<std::unique_ptr<ControlWatchHandle>> OpenControlWatch(
    const std::string& request, const std::string* authorization);

// GET /metrics on `address` with rsslab_server's names where they apply
// (memory, allocator, cache, requests, trims); returns the bound host:port.
absl::StatusOr<std::string> StartMetrics(const std::string& address);
void StopMetrics();

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_
