// rsslab.serve(): the Control service (control/service, the same code as
// rsslab_server's) inside the Python process, over a backend made of the
// package's state: snapshots and trims as the server's, phases through the
// callbacks the service registered with rsslab.on_phase().
//
// Two transports, one set of rules (control/service/control_calls.h): the
// process's grpcio (rsslab/_control_grpcio.py) or the package's gRPC C++
// (_rsslab_grpc.so, python/native/grpc_transport.cc, through Hooks()).
// Either listens and hands each call's bytes here; this module loads no
// gRPC C++ itself.
//
// Example (GIL not held around the hooks):
//   OpenControlCalls("127.0.0.1:0", "");  // checks, does not listen
//   ... the transport binds port P ...
//   absl::StatusOr<std::string> addr = ControlCallsBound(P);
//   std::string out, message;
//   int code = Hooks()->call("GetSnapshot", bytes, nullptr, -1, &out, &message);
//   StopControl();  // atexit: ends watch streams

#ifndef RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_
#define RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_

#include <Python.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "control/service/request_check.h"
#include "proto/control.pb.h"

namespace rsslab {
namespace py {

// GIL held. hook(phase: str, limit_bytes: int, timeout_s: float) -> previous
// phase (str); raises LookupError when nothing is registered for the phase,
// TimeoutError when the callback did not return within timeout_s.
void SetPhaseHook(PyObject* hook);
void ClearPhaseHook();

// The package's part of SetPhase (ControlHost::EnterPhase): the hook, GIL
// not held; sets previous_phase and no_callback. FAILED_PRECONDITION when
// the service's callback raised, DEADLINE_EXCEEDED when it did not return
// within `python_deadline`, UNAVAILABLE while shutting down.
absl::Status CallPhaseHook(const SetPhaseCall& call, absl::Duration python_deadline,
                           rsslab::v1::SetPhaseResponse* response);

// Once, at import: after fork() the child forgets the parent's Control rules
// and /metrics server (it has none of their threads) and can open its own.
void RegisterControlForkHandlers();

// Idempotent: ends the watch streams and forgets the address (the
// transport stops its own server).
void StopControl();

// Ends the watch streams, and any opened later, at once (interpreter
// shutdown: grpcio's run on executor threads that Python joins before
// atexit; a transport's stop).
void EndControlWatches();

// OpenControlCalls checks `address` (host:port, port 0 = any free one), the
// token file and the listen rule, and holds the rules; it does not listen.
// A second one while one is open is an error. ControlCallsBound records the
// port the transport bound and returns host:port.
absl::Status OpenControlCalls(const std::string& address, const std::string& token_file);
absl::StatusOr<std::string> ControlCallsBound(int port);
// The listen rule alone for `address` (a token, or TLS, beyond loopback):
// serve(server=) checks each address the service's server really listens on.
absl::Status CheckControlListen(const std::string& address, const std::string& token_file);

// The calls, token check first (python/native/control_hooks.h): what
// either transport calls, _rsslab_grpc.so through a capsule, the grpcio one
// through this module's bindings. No hook needs the GIL.
struct ControlHooks;
const ControlHooks* Hooks();

// GET /metrics on `address` with rsslab_server's names where they apply
// (memory, allocator, cache, requests, trims); returns the bound host:port.
absl::StatusOr<std::string> StartMetrics(const std::string& address);
void StopMetrics();

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_CONTROL_SERVER_H_
