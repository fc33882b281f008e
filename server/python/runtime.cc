#include "server/python/runtime.h"

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"

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

std::string TakePythonError(bool print_traceback) {
  if (!PyErr_Occurred()) return "unknown Python error";
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string name = "Exception";
  if (type != nullptr) {
    name = reinterpret_cast<PyTypeObject*>(type)->tp_name;
  }
  std::string msg;
  if (value != nullptr) {
    Ref s(PyObject_Str(value));
    if (s) {
      const char* c = PyUnicode_AsUTF8(s.get());
      if (c != nullptr) msg = c;
    }
    PyErr_Clear();
  }
  if (print_traceback) {
    Py_XINCREF(type);
    Py_XINCREF(value);
    Py_XINCREF(tb);
    PyErr_Restore(type, value, tb);
    PyErr_Print();
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return msg.empty() ? name : absl::StrCat(name, ": ", msg);
}

PythonRuntime::PythonRuntime(const Options& options)
    : handler_path_(options.handler_path),
      default_params_(options.default_params),
      cache_(options.cache_limit_bytes) {}

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
  return absl::OkStatus();
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
  Ref params(PyDict_New());
  for (const auto& kv : default_params_) {
    Ref v(PyUnicode_FromStringAndSize(kv.second.data(), kv.second.size()));
    PyDict_SetItemString(params.get(), kv.first.c_str(), v.get());
  }
  for (const auto& kv : request.params()) {
    Ref v(PyUnicode_FromStringAndSize(kv.second.data(), kv.second.size()));
    PyDict_SetItemString(params.get(), kv.first.c_str(), v.get());
  }
  Ref payload(PyBytes_FromStringAndSize(request.payload().data(), request.payload().size()));
  Ref req(Py_BuildValue("{s:K,s:K,s:O,s:O,s:O,s:i}", "id",
                        static_cast<unsigned long long>(request.id()), "seed",
                        static_cast<unsigned long long>(request.seed()), "payload",
                        payload.get(), "params", params.get(), "return_body",
                        request.return_body() ? Py_True : Py_False, "worker", worker));
  if (!req) return absl::InternalError(TakePythonError(false));
  Ref result(PyObject_CallFunctionObjArgs(handle_fn_, req.get(), cache_module_, nullptr));
  if (!result) {
    uint64_t n = handler_errors_.fetch_add(1);
    // Tracebacks for the first few errors, then every 1000th: enough to
    // debug without flooding stderr at thousands of requests a second.
    return absl::InternalError(TakePythonError(n < 5 || n % 1000 == 0));
  }
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
  if (finalized_ || main_state_ == nullptr) return;
  finalized_ = true;
  PyEval_RestoreThread(main_state_);
  cache_.Clear();
  Py_CLEAR(handle_fn_);
  Py_CLEAR(cache_module_);
  Py_CLEAR(gc_collect_);
  Py_CLEAR(noop_fn_);
  Py_CLEAR(gc_get_count_);
  Py_CLEAR(gil_enabled_fn_);
  Py_CLEAR(allocated_blocks_fn_);
  Py_FinalizeEx();
  main_state_ = nullptr;
}

}  // namespace rsslab
