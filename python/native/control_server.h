// rsslab.serve(): the Control service (control/service, the same code as
// rsslab_server's) inside the Python process, over a backend made of the
// package's state: snapshots and trims as the server's, phases through the
// callbacks the service registered with rsslab.on_phase().
//
// Example (GIL not held):
//   absl::StatusOr<std::string> addr = StartControl("127.0.0.1:0", "");
//   ...
//   StopControl();  // atexit: ends watch streams, shuts the server down

#ifndef RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_
#define RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_

#include <Python.h>

#include <string>

#include "absl/status/statusor.h"

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
// Idempotent; bounded (about a second).
void StopControl();

// GET /metrics on `address` with rsslab_server's names where they apply
// (memory, allocator, cache, requests, trims); returns the bound host:port.
absl::StatusOr<std::string> StartMetrics(const std::string& address);
void StopMetrics();

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_
