// What _rsslab.so hands _rsslab_grpc.so, the native Control transport, in
// a capsule: the token check, the rules and the answers stay in _rsslab.so,
// the only module with the protobuf messages (a second copy would register
// the same .proto files twice, which protobuf refuses at load), and
// _rsslab_grpc.so, the only one that loads gRPC C++, moves bytes. Both are
// built from one commit into one wheel, so the layout is shared.
//
// Example (in _rsslab_grpc.so):
//   const ControlHooks* h = static_cast<const ControlHooks*>(
//       PyCapsule_GetPointer(capsule, kControlHooksCapsule));
//   std::string out, message;
//   int code = h->call("GetSnapshot", request, nullptr, -1, &out, &message);

#ifndef RSSLAB_PYTHON_NATIVE_CONTROL_HOOKS_H_
#define RSSLAB_PYTHON_NATIVE_CONTROL_HOOKS_H_

#include <string>

namespace rsslab {
namespace py {

inline constexpr char kControlHooksCapsule[] = "rsslab._rsslab.ControlHooks";

// The bounds of both transports (the grpcio one reads them through
// _rsslab.control_limits()): watch streams, calls at once (watch streams
// included), and a request's size (Control's are a few dozen bytes).
inline constexpr int kControlMaxWatchStreams = 8;
inline constexpr int kControlMaxCalls = 12;
inline constexpr int kControlMaxRequestBytes = 64 << 10;

// Codes are absl::StatusCode (= grpc::StatusCode) values; 0 is OK, and
// `message` is set otherwise. `authorization` is the call's header value,
// nullptr when it has none. No hook needs the GIL held or released.
struct ControlHooks {
  int (*authorize)(const std::string* authorization, std::string* message);
  // deadline_s: seconds the caller still waits, < 0 for no deadline.
  int (*call)(const std::string& method, const std::string& request,
              const std::string* authorization, double deadline_s, std::string* response,
              std::string* message);
  // nullptr (with code and message) when refused.
  void* (*open_watch)(const std::string& request, const std::string* authorization, int* code,
                      std::string* message);
  // Blocks until the next snapshot is due; false once the stream ended.
  bool (*watch_next)(void* watch, std::string* snapshot);
  void (*watch_cancel)(void* watch);  // any thread
  void (*watch_close)(void* watch);   // once, after the last watch_next
};

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_CONTROL_HOOKS_H_
