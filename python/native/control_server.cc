#include "python/native/control_server.h"

#include <pthread.h>

#include <map>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/credentials.h"
#include "common/untrusted_text.h"
#include "common/listen.h"
#include "common/metrics/exposition.h"
#include "common/metrics/http_server.h"
#include "common/phase.h"
#include "common/thread_signals.h"
#include "common/units.h"
#include "control/service/control_calls.h"
#include "control/service/request_check.h"
#include "memory/snapshot/snapshot_metrics.h"
#include "python/native/control_hooks.h"
#include "python/native/package_state.h"
#include "python/native/tracked_threads.h"

namespace rsslab {
namespace py {
namespace {

PyObject* g_phase_hook = nullptr;  // GIL held to touch

// A callback's exception text goes back to a client that may print it:
// escaped (common/untrusted_text.h) and at most this long, the prefix included.
constexpr size_t kMaxCallbackMessageBytes = 1024;

std::string BoundedCallbackMessage(absl::string_view prefix, absl::string_view text) {
  const size_t budget = kMaxCallbackMessageBytes - prefix.size();
  // An escaped byte takes up to 4 ("\xNN"): shrink the shown input until
  // the escaped text, with Echo's "... (N bytes)" tail, fits.
  size_t shown = budget;
  std::string out = Echo(text, shown);
  while (out.size() > budget && shown > 16) {
    shown = shown * budget / out.size() - 8;
    out = Echo(text, shown);
  }
  return absl::StrCat(prefix, out);
}

// The Python exception as a status: TimeoutError (the callback did not
// return within the Python deadline: rsslab/_callbacks.py runs it on a thread
// of its own) DEADLINE_EXCEEDED; anything else the service's callback
// raised is FAILED_PRECONDITION naming it. (A phase with no callback is not
// an error: the answer's no_callback says so.)
absl::Status StatusFromPython(const std::string& phase) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string msg = "(unprintable)";
  if (PyObject* s = value ? PyObject_Str(value) : nullptr) {
    if (const char* c = PyUnicode_AsUTF8(s)) msg = c;
    Py_DECREF(s);
  }
  PyErr_Clear();
  const bool late = type != nullptr && PyErr_GivenExceptionMatches(type, PyExc_TimeoutError);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  if (late) return absl::DeadlineExceededError(BoundedCallbackMessage("", msg));
  return absl::FailedPreconditionError(BoundedCallbackMessage(
      absl::StrCat("the service's on_phase callback for '", phase, "' raised: "), msg));
}

}  // namespace

absl::Status CallPhaseHook(const SetPhaseCall& call, absl::Duration python_deadline,
                           rsslab::v1::SetPhaseResponse* response) {
  const std::string name = PhaseName(call.phase);
  absl::Status status = absl::OkStatus();
  std::string previous;
  std::string no_callback;
  const bool ran = WithGil([&] {
    if (g_phase_hook == nullptr) {
      status = absl::UnavailableError("the rsslab package is shutting down");
      return;
    }
    // The hook waits for the callback at most python_deadline.
    PyObject* r = PyObject_CallFunction(g_phase_hook, "sLd", name.c_str(),
                                        static_cast<long long>(call.cache_limit_bytes),  // NOLINT(runtime/int)
                                        absl::ToDoubleSeconds(python_deadline));
    if (r == nullptr) {
      status = StatusFromPython(name);
      return;
    }
    // (previous phase, why no callback ran or "")
    if (PyTuple_Check(r) && PyTuple_Size(r) == 2) {
      PyObject* p = PyTuple_GetItem(r, 0);
      PyObject* n = PyTuple_GetItem(r, 1);
      if (const char* c = PyUnicode_Check(p) ? PyUnicode_AsUTF8(p) : nullptr) previous = c;
      if (const char* c = PyUnicode_Check(n) ? PyUnicode_AsUTF8(n) : nullptr) no_callback = c;
    }
    PyErr_Clear();
    Py_DECREF(r);
  });
  if (!ran) return absl::UnavailableError("the Python interpreter is shutting down");
  if (!status.ok()) return status;
  response->set_previous_phase(previous);
  response->set_no_callback(no_callback);
  return absl::OkStatus();
}

namespace {

// The transport listens elsewhere (the process's grpcio, or _rsslab_grpc.so):
// here are the rules, the token and the address.
struct Running {
  std::shared_ptr<Credentials> security;
  std::shared_ptr<ControlCalls> calls;
  std::string host;
  std::string address;  // empty until ControlCallsBound
};
// Never destroyed: exit() runs static destructors before the package's
// stop when a signal handler calls it (uWSGI's die-on-term), or without
// that stop at all (the C library's exit() on any thread), while Control
// threads may still use these.
absl::Mutex& g_mu = *new absl::Mutex;
std::unique_ptr<Running>& g_running ABSL_GUARDED_BY(g_mu) = *new std::unique_ptr<Running>;
std::unique_ptr<metrics::MetricsHttpServer>& g_metrics ABSL_GUARDED_BY(g_mu) =
    *new std::unique_ptr<metrics::MetricsHttpServer>;

// fork(): the child has none of the parent's threads, so the Control rules
// (watch streams) and the /metrics server are the parent's alone. The child
// forgets them without running their destructors (they would join threads
// it does not have, or shut sockets the parent still listens on). It takes
// and releases no lock: g_mu may have been held at the fork by a thread
// that is not here (a Control call in flight), so the child gets a fresh
// one, and the parent's state is leaked whatever it was in the middle of.
void ChildAfterFork() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  new (&g_mu) absl::Mutex();  // the parent's is abandoned, never unlocked
  g_running.release();  // NOLINT(bugprone-unused-return-value): leaked on purpose
  g_metrics.release();  // NOLINT(bugprone-unused-return-value)
}

std::string RenderPackageMetrics() {
  // Totals first, as the server does: a trim finishing in between shows in
  // the gauges one scrape before the counters, never the reverse.
  std::map<std::string, Trimmer::TriggerTotals> trims = State().trimmer().totals();
  rsslab::v1::Snapshot s;
  // No Python part: a scrape never waits for the GIL (the phase and the
  // workers are the last ones a snapshot saw).
  ControlSnapshotOptions o;
  o.python = false;
  State().TakeSnapshot(o, &s);
  metrics::Exposition e;
  metrics::AppendMemoryMetrics(s, &e);
  e.Gauge("rsslab_phase", "1 for the current phase.", int64_t{1}, {{"phase", s.phase()}});
  e.Counter("rsslab_requests_total",
            "Requests counted by rsslab.grpc_interceptor() or rsslab.count_request().",
            s.requests_served());
  e.Counter("rsslab_handler_errors_total",
            "Requests whose handler raised, as rsslab.grpc_interceptor() saw them.",
            s.handler_errors());
  e.Histogram("rsslab_handler_latency_seconds",
              "Time in the service's handler per request, timed by rsslab.grpc_interceptor() "
              "(queueing excluded).",
              State().HandlerLatency());
  e.Gauge("rsslab_workers_configured", "Worker threads of the tracked executors.",
          static_cast<int64_t>(s.workers().configured()));
  metrics::AppendTrimMetrics(s, trims, &e);
  return e.Text();
}

}  // namespace

void RegisterControlForkHandlers() {
  static const int once = pthread_atfork(nullptr, nullptr, ChildAfterFork);
  (void)once;
}

void SetPhaseHook(PyObject* hook) {
  Py_XINCREF(hook);
  Py_XDECREF(g_phase_hook);
  g_phase_hook = hook;
}

void ClearPhaseHook() { Py_CLEAR(g_phase_hook); }

void StopControl() {
  std::unique_ptr<Running> r;
  {
    absl::MutexLock l(&g_mu);
    r = std::move(g_running);
  }
  if (r) r->calls->StopWatches();
}

void EndControlWatches() {
  absl::MutexLock l(&g_mu);
  if (g_running) g_running->calls->StopWatches();
}

absl::Status OpenControlCalls(const std::string& address, const std::string& token_file) {
  absl::MutexLock l(&g_mu);
  if (g_running) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Control service already listens on ", g_running->address,
                     " (one per process)"));
  }
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  SecurityOptions so;
  so.auth_token_file = token_file;
  absl::StatusOr<Credentials> sec = Credentials::Load(so);
  if (!sec.ok()) return sec.status();
  auto r = std::make_unique<Running>();
  r->security = std::make_shared<Credentials>(*std::move(sec));
  if (absl::Status c = r->security->CheckListen(address, "control"); !c.ok()) return c;
  r->host = hp->host;
  r->calls = std::make_shared<ControlCalls>(
      State().control(), kControlMaxWatchStreams, "the rsslab package's fixed limit");
  g_running = std::move(r);
  return absl::OkStatus();
}

absl::Status CheckControlListen(const std::string& address, const std::string& token_file) {
  SecurityOptions so;
  so.auth_token_file = token_file;
  absl::StatusOr<Credentials> sec = Credentials::Load(so);
  if (!sec.ok()) return sec.status();
  return sec->CheckListen(address, "control");
}

absl::StatusOr<std::string> ControlCallsBound(int port) {
  absl::MutexLock l(&g_mu);
  if (!g_running) return absl::FailedPreconditionError("no Control service is open");
  if (port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is not a bound port"));
  }
  g_running->address = JoinHostPort(g_running->host, port);
  return g_running->address;
}

namespace {

// One watch stream; `calls` keeps the rules alive for as long as the
// stream (declared first: destroyed last).
struct ControlWatchHandle {
  std::shared_ptr<ControlCalls> calls;
  std::unique_ptr<ControlCalls::Watch> watch;
};

// The open service's rules, after the token check.
absl::StatusOr<std::shared_ptr<ControlCalls>> Authorized(const std::string* authorization) {
  std::shared_ptr<ControlCalls> calls;
  std::shared_ptr<Credentials> security;
  {
    absl::MutexLock l(&g_mu);
    if (g_running) {
      calls = g_running->calls;
      security = g_running->security;
    }
  }
  if (!calls) return absl::UnavailableError(
      "the Control service is not running (stopped or stopping; rsslab.serve() starts it)");
  if (absl::Status a = security->AuthorizeHeader(authorization); !a.ok()) return a;
  return calls;
}

absl::Status CallControl(const std::string& method, const std::string& request,
                         const std::string* authorization, absl::Time call_deadline,
                         std::string* response) {
  absl::StatusOr<std::shared_ptr<ControlCalls>> calls = Authorized(authorization);
  if (!calls.ok()) return calls.status();
  return (*calls)->CallSerialized(method, request, call_deadline, response);
}

absl::StatusOr<std::unique_ptr<ControlWatchHandle>> OpenControlWatch(
    const std::string& request, const std::string* authorization) {
  absl::StatusOr<std::shared_ptr<ControlCalls>> calls = Authorized(authorization);
  if (!calls.ok()) return calls.status();
  absl::StatusOr<std::unique_ptr<ControlCalls::Watch>> w = (*calls)->OpenWatchSerialized(request);
  if (!w.ok()) return w.status();
  auto handle = std::make_unique<ControlWatchHandle>();
  handle->calls = *std::move(calls);
  handle->watch = *std::move(w);
  return handle;
}

int HookAuthorize(const std::string* authorization, std::string* message) {
  absl::Status s = Authorized(authorization).status();
  if (!s.ok()) *message = std::string(s.message());
  return static_cast<int>(s.code());
}

int HookCall(const std::string& method, const std::string& request,
             const std::string* authorization, double deadline_s, std::string* response,
             std::string* message) {
  const absl::Time deadline =
      deadline_s < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Seconds(deadline_s);
  absl::Status s = CallControl(method, request, authorization, deadline, response);
  if (!s.ok()) *message = std::string(s.message());
  return static_cast<int>(s.code());
}

void* HookOpenWatch(const std::string& request, const std::string* authorization, int* code,
                    std::string* message) {
  absl::StatusOr<std::unique_ptr<ControlWatchHandle>> w = OpenControlWatch(request, authorization);
  if (!w.ok()) {
    *code = static_cast<int>(w.status().code());
    *message = std::string(w.status().message());
    return nullptr;
  }
  return w->release();
}

bool HookWatchNext(void* watch, std::string* snapshot) {
  rsslab::v1::Snapshot snap;
  if (!static_cast<ControlWatchHandle*>(watch)->watch->Next(&snap)) return false;
  snap.SerializeToString(snapshot);
  return true;
}

void HookWatchCancel(void* watch) { static_cast<ControlWatchHandle*>(watch)->watch->Cancel(); }

void HookWatchClose(void* watch) { delete static_cast<ControlWatchHandle*>(watch); }

constexpr ControlHooks kHooks = {HookAuthorize, HookCall,        HookOpenWatch,
                                 HookWatchNext, HookWatchCancel, HookWatchClose};

}  // namespace

const ControlHooks* Hooks() { return &kHooks; }

absl::StatusOr<std::string> StartMetrics(const std::string& address) {
  absl::MutexLock l(&g_mu);
  if (g_metrics) {
    return absl::FailedPreconditionError(
        absl::StrCat("/metrics already served on ", g_metrics->address()));
  }
  ScopedAsyncSignalsBlocked blocked;  // its thread never runs the process's handlers
  absl::StatusOr<std::unique_ptr<metrics::MetricsHttpServer>> m =
      metrics::MetricsHttpServer::Start(metrics::DefaultToLoopback(address),
                                        RenderPackageMetrics);
  if (!m.ok()) return m.status();
  g_metrics = *std::move(m);
  return g_metrics->address();
}

void StopMetrics() {
  std::unique_ptr<metrics::MetricsHttpServer> m;
  {
    absl::MutexLock l(&g_mu);
    m = std::move(g_metrics);
  }
  if (m) m->Stop();
}

}  // namespace py
}  // namespace rsslab
