#include "server/python/runtime.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace {

// One thread state per attached OS thread, kept for the thread's life.
thread_local PyThreadState* t_state = nullptr;
thread_local PyGILState_STATE t_gil_state;

// Owned reference helper.
struct Ref {
  PyObject* p;
  explicit Ref(PyObject* o) : p(o) {}
  ~Ref() { Py_XDECREF(p); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  PyObject* get() const { return p; }
  explicit operator bool() const { return p != nullptr; }
};

}  // namespace

namespace {

constexpr size_t kMaxErrorMessage = 1024;
// A printed traceback's frames at most (the message is capped apart).
constexpr size_t kMaxTracebackBytes = 8192;

// Fetches and clears the pending exception; prints its traceback (with
// PyErr_Display, which never exits) when `print(type)` says so.
std::string TakeError(const std::function<bool(const std::string&)>& print,
                      std::string* type_name) {
  if (!PyErr_Occurred()) return "unknown Python error";
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (tb != nullptr && value != nullptr) PyException_SetTraceback(value, tb);
  std::string name = "Exception";
  if (type != nullptr) {
    name = reinterpret_cast<PyTypeObject*>(type)->tp_name;
  }
  // A BaseException that is not an Exception (SystemExit, KeyboardInterrupt,
  // GeneratorExit, a handler's own subclass) is reported like any other;
  // the note says why the server did not stop.
  const bool base_only = type != nullptr && PyExceptionClass_Check(type) &&
                         !PyErr_GivenExceptionMatches(type, PyExc_Exception);
  // The message escaped (ESC, CR, LF cannot forge a log line or drive the
  // terminal) and capped: it goes to the client and to stderr.
  std::string msg;
  if (value != nullptr) {
    Ref s(PyObject_Str(value));
    if (s) {
      Py_ssize_t len = 0;
      const char* c = PyUnicode_AsUTF8AndSize(s.get(), &len);
      if (c != nullptr) msg = Echo(absl::string_view(c, len), kMaxErrorMessage);
    }
    PyErr_Clear();
  }
  if (print(name)) {
    // Not PyErr_Display(): it writes the message whole (three exceptions of
    // 10 MB each once put 31 MB on stderr) and raw. The frames come from
    // traceback.format_tb, capped; the last line is the escaped message.
    std::string frames;
    Ref tbmod(PyImport_ImportModule("traceback"));
    Ref lines(tbmod && tb != nullptr ? PyObject_CallMethod(tbmod.get(), "format_tb", "O", tb)
                                     : nullptr);
    Ref joined(lines ? PyUnicode_Join(Ref(PyUnicode_FromString("")).get(), lines.get())
                     : nullptr);
    Py_ssize_t len = 0;
    const char* c = joined ? PyUnicode_AsUTF8AndSize(joined.get(), &len) : nullptr;
    if (c != nullptr) frames = EchoMultiline(absl::string_view(c, len), kMaxTracebackBytes);
    PyErr_Clear();
    fprintf(stderr, "Traceback (most recent call last):\n%s%s%s%s\n", frames.c_str(),
            frames.empty() || frames.back() == '\n' ? "" : "\n", Echo(name, 128).c_str(),
            msg.empty() ? "" : absl::StrCat(": ", msg).c_str());
    fflush(stderr);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  if (type_name != nullptr) *type_name = name;
  std::string out = msg.empty() ? name : absl::StrCat(name, ": ", msg);
  if (base_only) absl::StrAppend(&out, " (a BaseException from the handler: only this call failed)");
  return out;
}

}  // namespace

std::string TakePythonError(bool print_traceback, std::string* type_name) {
  return TakeError([print_traceback](const std::string&) { return print_traceback; }, type_name);
}

PythonRuntime::PythonRuntime(const Options& options)
    : handler_path_(options.handler_path),
      default_params_(options.default_params),
      cache_(options.cache_limit_bytes),
      budget_(options.budget),
      num_slots_(std::max(0, options.workers)) {
  slots_.reset(new CallSlot[num_slots_ > 0 ? num_slots_ : 1]);
}

PythonRuntime::~PythonRuntime() { Finalize(); }

absl::StatusOr<std::unique_ptr<PythonRuntime>> PythonRuntime::Start(const Options& options) {
  std::unique_ptr<PythonRuntime> rt(new PythonRuntime(options));
  RegisterCacheModule(&rt->cache_);

  // Honour PYTHONMALLOC and friends from the environment the process
  // started with (the pymalloc-off profile relies on it).
  PyPreConfig pre;
  PyPreConfig_InitPythonConfig(&pre);
  PyStatus st = Py_PreInitialize(&pre);
  if (PyStatus_Exception(st)) {
    return absl::InternalError(absl::StrCat("cannot pre-initialize Python: ",
                                            st.err_msg ? st.err_msg : "?"));
  }
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  // The server owns SIGINT/SIGTERM; Python must not install its handlers.
  config.install_signal_handlers = 0;
  config.parse_argv = 0;
  st = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(st)) {
    return absl::InternalError(absl::StrCat("cannot initialize Python: ",
                                            st.err_msg ? st.err_msg : "?"));
  }
  absl::Status imported = rt->Import();
  // Release the interpreter from the main thread whatever happened; workers
  // (or Finalize) take it from here.
  rt->main_state_ = PyEval_SaveThread();
  if (!imported.ok()) {
    rt->Finalize();
    return imported;
  }
  if (rt->budget_ > absl::ZeroDuration() && rt->num_slots_ > 0) rt->StartBudget();
  return rt;
}

absl::Status PythonRuntime::Import() {
  Ref gc(PyImport_ImportModule("gc"));
  Ref sys(PyImport_ImportModule("sys"));
  Ref importlib_util(PyImport_ImportModule("importlib.util"));
  if (!gc || !sys || !importlib_util) {
    return absl::InternalError("cannot import the standard library: " + TakePythonError(true));
  }
  gc_collect_ = PyObject_GetAttrString(gc.get(), "collect");
  gc_get_count_ = PyObject_GetAttrString(gc.get(), "get_count");
  allocated_blocks_fn_ = PyObject_GetAttrString(sys.get(), "getallocatedblocks");
  gil_enabled_fn_ = PyObject_GetAttrString(sys.get(), "_is_gil_enabled");
  if (gil_enabled_fn_ == nullptr) PyErr_Clear();  // before 3.13: always a GIL
  CheckAccelerators();
  Ref ns(PyDict_New());
  Ref code(ns ? PyRun_String("def noop():\n    pass\n", Py_file_input, ns.get(), ns.get())
              : nullptr);
  noop_fn_ = code ? PyDict_GetItemString(ns.get(), "noop") : nullptr;
  Py_XINCREF(noop_fn_);
  if (noop_fn_ == nullptr) {
    return absl::InternalError("cannot define the no-op function: " + TakePythonError(true));
  }
  cache_module_ = ImportCacheModule();
  if (cache_module_ == nullptr) {
    return absl::InternalError("cannot import rsslab.cache: " + TakePythonError(true));
  }

  // Load the handler by path, as module "rsslab_handler", with its directory
  // on sys.path so it can import its neighbours.
  std::string dir = handler_path_.substr(0, handler_path_.find_last_of('/') + 1);
  if (dir.empty()) dir = ".";
  Ref sys_path(PyObject_GetAttrString(sys.get(), "path"));
  Ref dir_obj(PyUnicode_FromString(dir.c_str()));
  if (sys_path && dir_obj) PyList_Insert(sys_path.get(), 0, dir_obj.get());

  Ref spec(PyObject_CallMethod(importlib_util.get(), "spec_from_file_location", "ss",
                               "rsslab_handler", handler_path_.c_str()));
  if (!spec || spec.get() == Py_None) {
    std::string err = PyErr_Occurred() ? TakePythonError(true) : "not a Python file";
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load handler ", handler_path_, ": ", err));
  }
  Ref module(PyObject_CallMethod(importlib_util.get(), "module_from_spec", "O", spec.get()));
  Ref loader(module ? PyObject_GetAttrString(spec.get(), "loader") : nullptr);
  Ref done(loader ? PyObject_CallMethod(loader.get(), "exec_module", "O", module.get())
                  : nullptr);
  if (!done) {
    return absl::InvalidArgumentError(
        absl::StrCat("handler ", handler_path_, " failed to import: ", TakePythonError(true)));
  }
  // What the handler runs with when a request brings no params of its own,
  // for snapshots: results then say which variant of a handler they measured
  // even when the server's command line did not set a knob.
  effective_params_.clear();
  Ref defaults(PyObject_GetAttrString(module.get(), "DEFAULTS"));
  if (!defaults) PyErr_Clear();
  if (defaults && PyDict_Check(defaults.get())) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(defaults.get(), &pos, &key, &value)) {
      Ref k(PyObject_Str(key));
      Ref v(PyObject_Str(value));
      const char* kc = k ? PyUnicode_AsUTF8(k.get()) : nullptr;
      const char* vc = v ? PyUnicode_AsUTF8(v.get()) : nullptr;
      if (kc != nullptr && vc != nullptr) effective_params_[kc] = vc;
    }
    PyErr_Clear();
  }
  for (const auto& kv : default_params_) effective_params_[kv.first] = kv.second;
  handle_fn_ = PyObject_GetAttrString(module.get(), "handle");
  if (handle_fn_ == nullptr || !PyCallable_Check(handle_fn_)) {
    PyErr_Clear();
    return absl::InvalidArgumentError(absl::StrCat(
        "handler ", handler_path_, " has no callable handle(request, cache)"));
  }
  if (absl::Status k = ReadKnobs(module.get()); !k.ok()) return k;
  budget_exc_ = PyErr_NewExceptionWithDoc(
      "rsslab.HandlerBudgetExceeded",
      "Raised inside a handler call that ran past the server's --handler_budget_ms.",
      PyExc_BaseException, nullptr);
  if (budget_exc_ == nullptr) return absl::InternalError(TakePythonError(true));
  return absl::OkStatus();
}

absl::Status PythonRuntime::ReadKnobs(PyObject* module) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("handler ", handler_path_, ": KNOBS ", why));
  };
  Ref knobs(PyObject_GetAttrString(module, "KNOBS"));
  if (!knobs) PyErr_Clear();
  if (knobs) {
    if (!PyDict_Check(knobs.get())) return bad("must be a dict name -> (lo, hi) or choices");
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(knobs.get(), &pos, &key, &value)) {
      const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
      if (k == nullptr) {
        PyErr_Clear();
        return bad("has a name that is not a str");
      }
      if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) < 1) {
        return bad(absl::StrCat("[", k, "] must be a tuple: (lo, hi) or (\"choice\", ...)"));
      }
      const Py_ssize_t n = PyTuple_GET_SIZE(value);
      bool all_str = true, all_num = true, all_int = true;
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* v = PyTuple_GET_ITEM(value, i);
        all_str = all_str && PyUnicode_Check(v);
        const bool is_int = PyLong_Check(v) && !PyBool_Check(v);
        all_num = all_num && (is_int || PyFloat_Check(v));
        all_int = all_int && is_int;
      }
      KnobBound b;
      if (all_str) {
        std::vector<std::string> choices;
        for (Py_ssize_t i = 0; i < n; ++i) {
          const char* c = PyUnicode_AsUTF8(PyTuple_GET_ITEM(value, i));
          if (c == nullptr) {
            PyErr_Clear();
            return bad(absl::StrCat("[", k, "] has a choice that is not UTF-8"));
          }
          choices.push_back(c);
        }
        b = KnobBound::Choice(std::move(choices));
      } else if (all_num && n == 2) {
        double lo = PyFloat_AsDouble(PyTuple_GET_ITEM(value, 0));
        double hi = PyFloat_AsDouble(PyTuple_GET_ITEM(value, 1));
        if (PyErr_Occurred() || !(lo <= hi)) {
          PyErr_Clear();
          return bad(absl::StrCat("[", k, "] needs lo <= hi"));
        }
        b = all_int ? KnobBound::Int(lo, hi) : KnobBound::Float(lo, hi);
      } else {
        return bad(absl::StrCat("[", k, "] must be (lo, hi) numbers or a tuple of strings"));
      }
      knobs_[k] = std::move(b);
    }
    // A knob the handler reads by default but does not bound is a knob any
    // client can set to anything: refuse to start.
    Ref defaults(PyObject_GetAttrString(module, "DEFAULTS"));
    if (!defaults) PyErr_Clear();
    if (defaults && PyDict_Check(defaults.get())) {
      pos = 0;
      while (PyDict_Next(defaults.get(), &pos, &key, &value)) {
        const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
        if (k != nullptr && knobs_.find(k) == knobs_.end()) {
          return bad(absl::StrCat("has no bound for DEFAULTS[\"", k, "\"]"));
        }
      }
      PyErr_Clear();
    }
  }
  if (!knobs) {
    Ref defaults(PyObject_GetAttrString(module, "DEFAULTS"));
    if (!defaults) PyErr_Clear();
    if (defaults) {
      fprintf(stderr,
              "rsslab_server: warning: handler %s declares DEFAULTS but no KNOBS: its knobs are "
              "not bounded (docs/HANDLERS.md)\n",
              handler_path_.c_str());
    }
  }
  if (absl::Status s = CheckParams(knobs_, default_params_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--handler_params: ", s.message()));
  }
  return absl::OkStatus();
}

void PythonRuntime::StartBudget() {
  budget_thread_ = std::thread([this] { BudgetLoop(); });
}

void PythonRuntime::StopBudget() {
  if (!budget_thread_.joinable()) return;
  budget_stop_.Notify();
  budget_thread_.join();
}

void PythonRuntime::BudgetLoop() {
  const absl::Duration tick =
      std::min(absl::Milliseconds(100), std::max(absl::Milliseconds(5), budget_ / 4));
  const int64_t budget_ns = absl::ToInt64Nanoseconds(budget_);
  while (!budget_stop_.WaitForNotificationWithTimeout(tick)) {
    const int64_t now = absl::GetCurrentTimeNanos();
    for (int w = 0; w < num_slots_; ++w) {
      const int64_t start = slots_[w].start_ns.load(std::memory_order_relaxed);
      if (start == 0 || now - start < budget_ns) continue;
      // Re-checked under the GIL, which the worker holds for its whole call:
      // the call seen above may have ended meanwhile.
      PyGILState_STATE g = PyGILState_Ensure();
      CallSlot& slot = slots_[w];
      if (slot.start_ns.load() == start && !slot.fired) {
        PyThreadState_SetAsyncExc(slot.ident, budget_exc_);
        slot.fired = true;
      }
      PyGILState_Release(g);
    }
  }
}

void PythonRuntime::CheckAccelerators() {
  accelerators_.clear();
  for (const char* name : kAccelerators) {
    Accelerator a;
    a.name = name;
    Ref m(PyImport_ImportModule(name));
    if (!m) {
      // E.g. an extension module built against symbols the executable does
      // not export: the import fails and json quietly uses pure Python.
      a.origin = "missing: " + TakePythonError(false);
    } else {
      a.loaded = true;
      Ref file(PyObject_GetAttrString(m.get(), "__file__"));
      const char* f = file && PyUnicode_Check(file.get()) ? PyUnicode_AsUTF8(file.get()) : nullptr;
      a.origin = f != nullptr ? f : "built-in";
      PyErr_Clear();
    }
    accelerators_.push_back(std::move(a));
  }
  for (const Accelerator& a : accelerators_) {
    if (!a.loaded) {
      fprintf(stderr,
              "rsslab_server: warning: Python accelerator %s is not available (%s); handlers "
              "using it run a slower pure-Python fallback\n",
              a.name.c_str(), a.origin.c_str());
    }
  }
}

void PythonRuntime::BeginCall(int worker) {
  if (worker < 0 || worker >= num_slots_) return;
  CallSlot& slot = slots_[worker];
  slot.ident = PyThread_get_thread_ident();
  slot.fired = false;
  ++slot.seq;
  slot.start_ns.store(absl::GetCurrentTimeNanos());
}

bool PythonRuntime::EndCall(int worker) {
  if (worker < 0 || worker >= num_slots_) return false;
  CallSlot& slot = slots_[worker];
  slot.start_ns.store(0);
  if (!slot.fired) return false;
  // Fired as the call was ending: drop the exception if it was not raised
  // yet, so it cannot hit this thread's next call.
  PyThreadState_SetAsyncExc(slot.ident, nullptr);
  slot.fired = false;
  return true;
}

void PythonRuntime::AttachThread() {
  // PyGILState_Ensure creates this thread's state; keeping the state for the
  // thread's life avoids creating and destroying one per request.
  t_gil_state = PyGILState_Ensure();
  t_state = PyEval_SaveThread();
}

void PythonRuntime::DetachThread() {
  if (t_state == nullptr) return;
  PyEval_RestoreThread(t_state);
  t_state = nullptr;
  PyGILState_Release(t_gil_state);
}

PythonRuntime::Scope::Scope() { PyEval_RestoreThread(t_state); }
PythonRuntime::Scope::~Scope() { t_state = PyEval_SaveThread(); }

absl::Status PythonRuntime::Handle(const rsslab::v1::HandleRequest& request, int worker,
                                   rsslab::v1::HandleResponse* response) {
  // Callers check the params first (CheckRequestParams); a key or value
  // that still does not decode fails the call instead of reaching Python.
  Ref params(PyDict_New());
  auto put = [&params](const std::string& key, const std::string& value) {
    Ref k(PyUnicode_FromStringAndSize(key.data(), key.size()));
    Ref v(PyUnicode_FromStringAndSize(value.data(), value.size()));
    if (!k || !v || PyDict_SetItem(params.get(), k.get(), v.get()) != 0) {
      PyErr_Clear();
      return absl::InvalidArgumentError(
          absl::StrCat("param ", Quote(key), "=", Quote(value), " is not valid UTF-8"));
    }
    return absl::OkStatus();
  };
  for (const auto& kv : default_params_) {
    if (absl::Status s = put(kv.first, kv.second); !s.ok()) return s;
  }
  for (const auto& kv : request.params()) {
    if (absl::Status s = put(kv.first, kv.second); !s.ok()) return s;
  }
  Ref payload(PyBytes_FromStringAndSize(request.payload().data(), request.payload().size()));
  Ref req(Py_BuildValue("{s:K,s:K,s:O,s:O,s:O,s:i}", "id",
                        static_cast<unsigned long long>(request.id()), "seed",
                        static_cast<unsigned long long>(request.seed()), "payload",
                        payload.get(), "params", params.get(), "return_body",
                        request.return_body() ? Py_True : Py_False, "worker", worker));
  if (!req) return absl::InternalError(TakePythonError(false));
  BeginCall(worker);
  Ref result(PyObject_CallFunctionObjArgs(handle_fn_, req.get(), cache_module_, nullptr));
  const bool over_budget = EndCall(worker);
  if (!result) {
    handler_errors_.fetch_add(1);
    const bool budget = budget_exc_ != nullptr && PyErr_ExceptionMatches(budget_exc_);
    // Tracebacks for the first few errors, then one line per interval with
    // counts per type (HandlerErrorLog): a load with one bad param must not
    // grow the log without bound.
    const absl::Time now = absl::Now();
    std::string msg = TakeError(
        [this, now](const std::string& type) { return error_log_.Note(type, now); }, nullptr);
    if (budget) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "the handler ran past the server's per-request budget of %d ms (--handler_budget_ms)",
          absl::ToInt64Milliseconds(budget_)));
    }
    return absl::InternalError(msg);
  }
  (void)over_budget;  // finished just in time: the result stands
  response->set_id(request.id());
  PyObject* r = result.get();
  PyObject* body = nullptr;
  if (PyBytes_Check(r)) {
    body = r;
  } else if (PyDict_Check(r)) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(r, &pos, &key, &value)) {
      const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
      if (k == nullptr) {
        PyErr_Clear();
        continue;
      }
      std::string name(k);
      if (name == "body") {
        if (PyBytes_Check(value)) body = value;
      } else if (name == "body_size") {
        response->set_body_size(PyLong_AsLongLong(value));
      } else if (name == "stored") {
        response->set_stored(PyObject_IsTrue(value) == 1);
      } else {
        Ref s(PyObject_Str(value));
        const char* c = s ? PyUnicode_AsUTF8(s.get()) : nullptr;
        if (c != nullptr) (*response->mutable_result())[name] = c;
      }
    }
    if (PyErr_Occurred()) {
      handler_errors_.fetch_add(1);
      return absl::InternalError("handler returned a bad value: " + TakePythonError(false));
    }
  } else if (r != Py_None) {
    handler_errors_.fetch_add(1);
    return absl::InternalError(absl::StrCat("handler returned ", Py_TYPE(r)->tp_name,
                                            "; expected dict, bytes or None"));
  }
  if (body != nullptr) {
    if (response->body_size() == 0) response->set_body_size(PyBytes_GET_SIZE(body));
    if (request.return_body()) {
      response->set_body(PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body));
    }
  }
  return absl::OkStatus();
}

void PythonRuntime::YieldIfAsked() {
  Ref r(PyObject_CallNoArgs(noop_fn_));
  if (!r) PyErr_Clear();
}

int64_t PythonRuntime::Collect() {
  Ref n(PyObject_CallNoArgs(gc_collect_));
  if (!n) {
    PyErr_Clear();
    return -1;
  }
  return PyLong_AsLongLong(n.get());
}

void PythonRuntime::FillInfo(rsslab::v1::PythonInfo* info) {
  info->set_version(Py_GetVersion());
  Ref blocks(PyObject_CallNoArgs(allocated_blocks_fn_));
  if (blocks) info->set_allocated_blocks(PyLong_AsLongLong(blocks.get()));
  Ref counts(PyObject_CallNoArgs(gc_get_count_));
  if (counts && PyTuple_Check(counts.get())) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(counts.get()); ++i) {
      info->add_gc_counts(PyLong_AsLongLong(PyTuple_GET_ITEM(counts.get(), i)));
    }
  }
  bool gil = true;
  if (gil_enabled_fn_ != nullptr) {
    Ref g(PyObject_CallNoArgs(gil_enabled_fn_));
    if (g) gil = PyObject_IsTrue(g.get()) == 1;
  }
  info->set_gil_enabled(gil);
  for (const Accelerator& a : accelerators_) {
    rsslab::v1::PythonModule* m = info->add_accelerators();
    m->set_name(a.name);
    m->set_origin(a.origin);
    m->set_loaded(a.loaded);
  }
  if (PyErr_Occurred()) PyErr_Clear();
}

void PythonRuntime::Finalize() {
  StopBudget();
  if (finalized_ || main_state_ == nullptr) return;
  finalized_ = true;
  error_log_.Flush(absl::Now());
  PyEval_RestoreThread(main_state_);
  cache_.Clear();
  Py_CLEAR(handle_fn_);
  Py_CLEAR(cache_module_);
  Py_CLEAR(gc_collect_);
  Py_CLEAR(noop_fn_);
  Py_CLEAR(gc_get_count_);
  Py_CLEAR(gil_enabled_fn_);
  Py_CLEAR(allocated_blocks_fn_);
  Py_CLEAR(budget_exc_);
  Py_FinalizeEx();
  main_state_ = nullptr;
}

}  // namespace rsslab
