// rsslab._rsslab_grpc: the native Control transport, serve(transport=
// "native"). A gRPC C++ server of the package's own, loaded only when asked
// for, so a service that serves Control through its grpcio (or not at all)
// never loads gRPC C++. A generic service: it checks the token before it
// reads a request (an unauthorized client's request is never read), then
// hands the bytes to _rsslab.so's hooks (python/native/control_hooks.h) on
// a thread of its own per call, since snapshots, trims and watch streams
// block.
//
//   from rsslab import _rsslab, _rsslab_grpc
//   _rsslab.open_control_calls("127.0.0.1:0", "")
//   port = _rsslab_grpc.start("127.0.0.1:0", _rsslab.control_hooks())
//   ...
//   _rsslab_grpc.stop()

#include <pybind11/pybind11.h>
#include <pthread.h>

#include <atomic>
#include <chrono>  // NOLINT(build/c++11)
#include <condition_variable>  // NOLINT(build/c++11)
#include <memory>
#include <mutex>  // NOLINT(build/c++11)
#include <new>
#include <optional>
#include <string>
#include <thread>  // NOLINT(build/c++11)
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/thread_signals.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "python/native/control_hooks.h"

namespace py11 = pybind11;

namespace rsslab {
namespace py {
namespace {

constexpr char kPrefix[] = "/rsslab.v1.Control/";

const ControlHooks* g_hooks = nullptr;
std::atomic<int> g_calls{0};

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

class Call : public grpc::ServerGenericBidiReactor {
 public:
  explicit Call(grpc::GenericCallbackServerContext* context) : context_(context) {
    const std::string& full = context->method();
    method_ = absl::StartsWith(full, kPrefix) ? full.substr(sizeof(kPrefix) - 1) : "";
    if (method_ != "SetPhase" && method_ != "GetSnapshot" && method_ != "Trim" &&
        method_ != "WatchSnapshots") {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          absl::StrCat("no method ", full.substr(0, 128))));
      return;
    }
    auto it = context->client_metadata().find("authorization");
    if (it != context->client_metadata().end()) {
      authorization_ = std::string(it->second.data(), it->second.size());
    }
    std::string message;
    if (int code = g_hooks->authorize(Authorization(), &message); code != 0) {
      Finish(grpc::Status(static_cast<grpc::StatusCode>(code), message));
      return;
    }
    if (g_calls.fetch_add(1) >= kControlMaxCalls) {
      g_calls.fetch_sub(1);
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("more than ", kControlMaxCalls, " Control calls at once")));
      return;
    }
    counted_ = true;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the call carried no request"));
      return;
    }
    std::thread([this] { Run(); }).detach();
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> l(mu_);
    write_done_ = true;
    write_ok_ = ok;
    cv_.notify_all();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> l(mu_);
    cancelled_ = true;
    if (watch_ != nullptr) g_hooks->watch_cancel(watch_);
  }

  void OnDone() override { delete this; }

 private:
  const std::string* Authorization() const {
    return authorization_ ? &*authorization_ : nullptr;
  }

  // Every path ends here or in StartWriteAndFinish: nothing touches `this`
  // after Finish (OnDone may already have deleted it).
  void Done(const grpc::Status& status) {
    if (counted_) g_calls.fetch_sub(1);
    Finish(status);
  }

  void Run() {
    const std::string request = ToString(request_);
    if (method_ == "WatchSnapshots") {
      RunWatch(request);
      return;
    }
    const auto deadline = context_->deadline();
    double left = -1;
    if (deadline != std::chrono::system_clock::time_point::max()) {
      left = std::max(0.0, std::chrono::duration<double>(deadline -
                                                         std::chrono::system_clock::now()).count());
    }
    std::string response, message;
    const int code =
        g_hooks->call(method_, request, Authorization(), left, &response, &message);
    if (code != 0) {
      Done(grpc::Status(static_cast<grpc::StatusCode>(code), message));
      return;
    }
    response_ = ToBuffer(response);
    g_calls.fetch_sub(1);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void RunWatch(const std::string& request) {
    int code = 0;
    std::string message;
    void* watch = g_hooks->open_watch(request, Authorization(), &code, &message);
    if (watch == nullptr) {
      Done(grpc::Status(static_cast<grpc::StatusCode>(code), message));
      return;
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      watch_ = watch;
      if (cancelled_) g_hooks->watch_cancel(watch);
    }
    std::string snapshot;
    while (g_hooks->watch_next(watch, &snapshot)) {
      response_ = ToBuffer(snapshot);
      snapshot.clear();
      {
        std::lock_guard<std::mutex> l(mu_);
        write_done_ = false;
      }
      StartWrite(&response_);
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return write_done_; });
      if (!write_ok_) break;  // the client went away
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      watch_ = nullptr;
    }
    g_hooks->watch_close(watch);
    Done(grpc::Status::OK);
  }

  grpc::GenericCallbackServerContext* const context_;
  std::string method_;
  std::optional<std::string> authorization_;
  bool counted_ = false;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool write_done_ = false;  // guarded by mu_
  bool write_ok_ = false;    // guarded by mu_
  bool cancelled_ = false;   // guarded by mu_
  void* watch_ = nullptr;    // guarded by mu_
};

class Service : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    return new Call(context);
  }
};

// The server and service are never destroyed by exit(): its static
// destructors run before the package's stop when a signal handler calls
// it (uWSGI's die-on-term: the destroyed server was then stopped again and
// crashed), or without that stop at all (the C library's exit() on any
// thread: ~Server waited for calls that wait for the GIL the exiting
// thread holds). stop() is what shuts the server down; a server still
// running at exit() is left to the process's end.
std::mutex g_mu;  // trivially destructible
std::unique_ptr<Service>& g_service = *new std::unique_ptr<Service>;          // guarded by g_mu
std::unique_ptr<grpc::Server>& g_server = *new std::unique_ptr<grpc::Server>;  // guarded by g_mu

// fork(): the server's threads stay in the parent. A child that destroyed
// or shut down the inherited server would shut the listening socket the
// parent shares (its Control stops accepting) and join threads it does not
// have (it crashed at exit): it forgets the server instead, leaked, and can
// start one of its own. It takes and releases no lock (a thread that is not
// here may have held g_mu at the fork): the child gets a fresh mutex.
void ChildAfterFork() {
  new (&g_mu) std::mutex();  // the parent's is abandoned, never unlocked
  g_server.release();        // NOLINT(bugprone-unused-return-value): leaked on purpose
  g_service.release();       // NOLINT(bugprone-unused-return-value)
  g_calls.store(0);
}

int Start(const std::string& address, py11::capsule hooks) {
  const auto* h = static_cast<const ControlHooks*>(
      PyCapsule_GetPointer(hooks.ptr(), kControlHooksCapsule));
  if (h == nullptr) throw py11::error_already_set();
  py11::gil_scoped_release nogil;
  // gRPC's threads (started here, and the ones they start) and the calls'
  // never run the process's signal handlers: uWSGI's die-on-term calls
  // exit() from its SIGTERM handler, and from a gRPC thread that exit
  // hung in Py_FinalizeEx.
  ScopedAsyncSignalsBlocked blocked;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_server) throw std::runtime_error("the native Control transport already listens");
  g_hooks = h;
  auto service = std::make_unique<Service>();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterCallbackGenericService(service.get());
  builder.SetMaxReceiveMessageSize(kControlMaxRequestBytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) return 0;
  g_service = std::move(service);
  g_server = std::move(server);
  return port;
}

void Stop() {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<Service> service;
  {
    py11::gil_scoped_release nogil;
    std::lock_guard<std::mutex> l(g_mu);
    server = std::move(g_server);
    service = std::move(g_service);
  }
  if (!server) return;
  py11::gil_scoped_release nogil;
  ScopedAsyncSignalsBlocked blocked;  // threads the shutdown may start, as in Start
  // Calls in flight get a second; the watch streams have been ended first.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
}

}  // namespace

PYBIND11_MODULE(_rsslab_grpc, m) {
  m.doc() = "rsslab's native Control transport (gRPC C++); use rsslab.serve(transport='native').";
  pthread_atfork(nullptr, nullptr, ChildAfterFork);
  // -> the bound port, 0 when the address cannot be listened on.
  m.def("start", &Start);
  m.def("stop", &Stop);
}

}  // namespace py
}  // namespace rsslab
