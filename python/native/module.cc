// rsslab._rsslab: the package's native half. Every figure and release comes
// from the libraries rsslab_server uses (memory/alloc, memory/trim,
// memory/snapshot, common/procfs); this file only binds them to Python and
// owns the package's process-wide state (the trimmer over the tracked
// threads, the automatic trim thread, the request counter).
//
// Python never calls this module directly; the rsslab package validates the
// arguments and calls it:
//   from rsslab import _rsslab as n
//   n.release(0, 2.0)            # TrimResult as a dict, GIL released
//   n.snapshot(False, False)     # Snapshot as a dict

#include <dlfcn.h>
#include <malloc.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/phase.h"
#include "common/procfs/procfs.h"
#include "common/trim_modes.h"
#include "control/service/request_check.h"
#include "memory/alloc/alloc.h"
#include "memory/snapshot/process_snapshot.h"
#include "memory/trim/auto_trim.h"
#include "memory/trim/trimmer.h"
#include "python/native/control_hooks.h"
#include "python/native/control_server.h"
#include "python/native/gil_runner.h"
#include "python/native/package_state.h"
#include "python/native/to_python.h"
#include "python/native/tracked_threads.h"

namespace py11 = pybind11;

namespace rsslab {
namespace py {
namespace {

py11::dict AllocatorInfo() {
  const alloc::Allocator& a = alloc::Allocator::Get();
  py11::dict d;
  d["name"] = a.name();
  d["library"] = a.library();
  d["version"] = a.Version();
  // The two checks the server makes, shown: what /proc/self/maps says is
  // mapped, and which library malloc itself resolves to.
  std::string maps_name = "unreadable";
  if (absl::StatusOr<std::string> maps = procfs::ReadProcFile(0, "maps"); maps.ok()) {
    maps_name = procfs::DetectAllocator(*maps).name;
  }
  std::string owner = "unknown";
  Dl_info info;
  void* sym = dlsym(RTLD_DEFAULT, "malloc");
  if (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) {
    owner = info.dli_fname;
  }
  d["maps"] = maps_name;
  d["malloc_from"] = owner;
  rsslab::v1::AllocatorStats s;
  a.FillStats(&s);
  d["note"] = s.note();
  py11::dict env;
  if (auto e = procfs::ReadAllocatorEnv(0); e.ok()) {
    for (const auto& kv : *e) env[py11::str(kv.first)] = py11::str(kv.second);
  }
  d["start_env"] = env;
  return d;
}

bool IsAllocatorVariable(const std::string& name) {
  return !procfs::AllocatorEnv({{name, ""}}).empty();
}

py11::dict Release(int mode, double timeout_s, const std::string& trigger) {
  // The Control service's check: a number the proto does not name is refused.
  if (absl::Status m = CheckTrimMode(mode, "release(mode=)"); !m.ok()) {
    throw py11::value_error(std::string(m.message()));
  }
  rsslab::v1::TrimResult r;
  {
    py11::gil_scoped_release nogil;
    r = State().Release(static_cast<rsslab::v1::TrimMode>(mode), absl::Seconds(timeout_s),
                        trigger);
  }
  py11::dict d = MessageToDict(r);
  const alloc::FreeBlockPurge p = State().last_purge();
  py11::dict purge;
  purge["ran"] = p.ran;
  purge["note"] = p.note;
  purge["pages"] = p.pages;
  purge["freeBlocks"] = p.free_blocks;
  purge["ranges"] = p.ranges;
  purge["bytes"] = p.bytes;
  purge["failed"] = p.failed;
  purge["longestUs"] = p.duration_us;
  purge["residentFreeBytes"] = p.resident_free_bytes;
  purge["threadsSkipped"] = p.threads_skipped;
  d["threadsClean"] = State().threads().last_clean_count();
  d["freeBlockPurge"] = purge;
  return d;
}

py11::dict Snapshot(bool gc, bool detail) {
  rsslab::v1::Snapshot s;
  {
    py11::gil_scoped_release nogil;
    ControlSnapshotOptions o;
    o.gc = gc;
    o.detail = detail;
    State().TakeSnapshot(o, &s);
  }
  return MessageToDict(s);
}

// The arena variables of the start environment (/proc/self/environ, what
// glibc read): MALLOC_ARENA_MAX and MALLOC_ARENA_TEST, or their
// GLIBC_TUNABLES spellings glibc.malloc.arena_max / arena_test, which glibc
// applies after the variables (so they win).
struct StartArenaEnv {
  int64_t arena_max = 0;
  // Names the setting: "MALLOC_ARENA_MAX=2", "GLIBC_TUNABLES' glibc.malloc.arena_max=2".
  std::string arena_max_from;
  int64_t arena_test = 8;
};

StartArenaEnv ReadStartArenaEnv() {
  StartArenaEnv out;
  std::map<std::string, std::string> env;
  if (auto e = procfs::ReadAllocatorEnv(0); e.ok()) env = *e;
  int64_t v = 0;
  if (auto it = env.find("MALLOC_ARENA_MAX");
      it != env.end() && absl::SimpleAtoi(it->second, &v) && v > 0) {
    out.arena_max = v;
    out.arena_max_from = absl::StrCat("MALLOC_ARENA_MAX=", it->second);
  }
  if (auto it = env.find("MALLOC_ARENA_TEST"); it != env.end()) {
    absl::SimpleAtoi(it->second, &out.arena_test);
  }
  if (auto it = env.find("GLIBC_TUNABLES"); it != env.end()) {
    for (absl::string_view item : absl::StrSplit(it->second, ':')) {
      std::pair<absl::string_view, absl::string_view> kv =
          absl::StrSplit(item, absl::MaxSplits('=', 1));
      if (kv.first == "glibc.malloc.arena_max" && absl::SimpleAtoi(kv.second, &v) && v > 0) {
        out.arena_max = v;
        out.arena_max_from = absl::StrCat("GLIBC_TUNABLES' glibc.malloc.arena_max=", kv.second);
      } else if (kv.first == "glibc.malloc.arena_test") {
        absl::SimpleAtoi(kv.second, &out.arena_test);
      }
    }
  }
  return out;
}

// mallopt(M_ARENA_MAX, n), applied only when it can still take effect.
// glibc fixes its arena limit the first time a thread needs a new arena
// and either a limit is set (MALLOC_ARENA_MAX at start, or an earlier cap)
// or more than arena_test (8) arenas exist; from then on mallopt changes
// nothing and still returns 1. Arenas are never destroyed either.
py11::dict CapArenas(int n) {
  const alloc::Allocator& a = alloc::Allocator::Get();
  const std::string fix_env = absl::StrCat(
      "set MALLOC_ARENA_MAX=", n, " in the environment before the process starts");
  if (!a.ArenaCapApplies()) {
    throw py11::value_error(absl::StrCat("cap_arenas: this process allocates with ", a.name(),
                                         " (", a.library(),
                                         "), not glibc: glibc's arena cap does not apply; ",
                                         a.ArenaCountHint()));
  }
  rsslab::v1::GlibcStats g;
  int arenas = -1;
  if (alloc::ReadMallocInfo(&g).ok()) arenas = g.malloc_info_arenas();
  const StartArenaEnv start = ReadStartArenaEnv();
  const int64_t start_cap = start.arena_max;
  const int64_t arena_test = start.arena_test;
  const int64_t earlier = State().arena_cap();
  py11::dict d;
  d["n"] = n;
  d["arenas"] = arenas;
  if (start_cap > 0) {
    // The start environment fixed the limit before any Python ran (glibc
    // reads it at its first malloc): mallopt would still return 1, and a
    // different n would silently do nothing.
    if (start_cap == n) {
      d["applied"] = false;
      d["detail"] = absl::StrCat("no-op: ", start.arena_max_from,
                                 " in the start environment already caps glibc at ", n,
                                 " arenas");
      return d;
    }
    throw py11::value_error(absl::StrCat(
        "cap_arenas(", n, ") cannot take effect: ", start.arena_max_from,
        " in the start environment already fixed glibc's arena limit at ", start_cap,
        " and mallopt cannot change it; set ", n, " there instead"));
  }
  if (arenas < 0) {
    throw py11::value_error("cap_arenas: glibc's malloc_info could not be read, so the effect "
                            "cannot be checked; " + fix_env);
  }
  if (arenas > n) {
    throw py11::value_error(absl::StrCat(
        "cap_arenas(", n, ") is too late: ", arenas,
        " glibc arenas exist already and glibc never removes one; ", fix_env,
        ", or call rsslab.cap_arenas() at import, before threads allocate"));
  }
  const int64_t fixed_at = earlier;
  if (fixed_at > 0 && arenas >= 2) {
    if (fixed_at == n) {
      d["applied"] = true;
      d["detail"] = absl::StrCat("already in effect: the limit was fixed at ", n,
                                 " by an earlier cap");
      return d;
    }
    throw py11::value_error(absl::StrCat(
        "cap_arenas(", n, ") is too late: glibc already fixed its arena limit at ", fixed_at,
        " (an earlier cap_arenas)",
        " when a thread created an arena, and mallopt cannot change it; ", fix_env));
  }
  if (fixed_at == 0 && arenas > arena_test) {
    throw py11::value_error(absl::StrCat(
        "cap_arenas(", n, ") is too late: ", arenas, " arenas exist (more than arena_test=",
        arena_test, "), so glibc already fixed its limit at 8 per core; ", fix_env,
        ", or call rsslab.cap_arenas() at import"));
  }
  if (mallopt(M_ARENA_MAX, n) != 1) {
    throw py11::value_error(absl::StrCat("cap_arenas: mallopt(M_ARENA_MAX, ", n,
                                         ") failed; ", fix_env));
  }
  State().set_arena_cap(n);
  d["applied"] = true;
  d["detail"] = absl::StrCat("glibc will create at most ", n, " arenas (", arenas,
                             " exist now; the limit is fixed when a thread next needs one)");
  return d;
}

void StartAutoTrim(const std::string& mode, const std::string& signal, double gap_mb,
                   double settle_s, double settle_fraction, double interval_s,
                   double min_spacing_s, double tick_s) {
  AutoTrimOptions o;
  absl::StatusOr<AutoTrimOptions::Mode> m = ParseAutoTrimMode(mode, "auto_trim(mode=)");
  if (!m.ok()) throw py11::value_error(std::string(m.status().message()));
  o.mode = *m;
  o.gap_bytes = static_cast<int64_t>(gap_mb * (1 << 20));
  o.settle = absl::Seconds(settle_s);
  o.settle_fraction = settle_fraction;
  o.interval = absl::Seconds(interval_s);
  o.min_spacing = absl::Seconds(min_spacing_s);
  o.tick = absl::Seconds(tick_s);
  o.rate_window = std::max(o.rate_window, o.tick);
  if (absl::Status v = ValidateAutoTrimOptions(o, AutoTrimCaller::kPackage); !v.ok()) {
    throw py11::value_error(std::string(v.message()));
  }
  py11::gil_scoped_release nogil;
  State().StartAutoTrim(o, signal);
}

// A watch stream of the grpcio transport, over the hooks; used from the
// one handler thread that serves the stream (cancel from any).
class ControlWatch {
 public:
  explicit ControlWatch(void* watch) : watch_(watch) {}
  ~ControlWatch() { Close(); }
  ControlWatch(const ControlWatch&) = delete;
  ControlWatch& operator=(const ControlWatch&) = delete;

  py11::object Next() {
    if (watch_ == nullptr) return py11::none();
    std::string snapshot;
    bool more;
    {
      py11::gil_scoped_release nogil;
      more = Hooks()->watch_next(watch_, &snapshot);
    }
    return more ? py11::object(py11::bytes(snapshot)) : py11::object(py11::none());
  }
  void Cancel() {
    if (watch_ != nullptr) Hooks()->watch_cancel(watch_);
  }
  void Close() {
    if (watch_ != nullptr) Hooks()->watch_close(watch_);
    watch_ = nullptr;
  }

 private:
  void* watch_;
};

// The Control service: the rules and the answers here, the sockets in a
// transport (rsslab/_control_grpcio.py, or _rsslab_grpc.so through
// control_hooks()).
void BindControl(py11::module_& m) {  // NOLINT(runtime/references)
  m.def("open_control_calls", [](const std::string& address, const std::string& token_file) {
    absl::Status s;
    {
      py11::gil_scoped_release nogil;
      s = OpenControlCalls(address, token_file);
    }
    if (!s.ok()) throw py11::value_error(std::string(s.message()));
  });
  m.def("check_control_listen", [](const std::string& address, const std::string& token_file) {
    absl::Status s;
    {
      py11::gil_scoped_release nogil;
      s = CheckControlListen(address, token_file);
    }
    if (!s.ok()) throw py11::value_error(std::string(s.message()));
  });
  m.def("end_control_watches", []() { EndControlWatches(); });
  m.def("control_hooks", []() {
    return py11::capsule(static_cast<const void*>(Hooks()), kControlHooksCapsule);
  });
  m.def("control_calls_bound", [](int port) {
    absl::StatusOr<std::string> r = ControlCallsBound(port);
    if (!r.ok()) throw py11::value_error(std::string(r.status().message()));
    return *r;
  });
  m.def("control_limits", []() {
    py11::dict d;
    d["max_watch_streams"] = kControlMaxWatchStreams;
    d["max_calls"] = kControlMaxCalls;
    d["max_request_bytes"] = kControlMaxRequestBytes;
    return d;
  });
  // -> (status code, message, serialized answer); deadline_s < 0: none.
  m.def("control_call", [](const std::string& method, py11::bytes request,
                           std::optional<std::string> authorization, double deadline_s) {
    const std::string in = request;
    std::string out, message;
    int code;
    {
      py11::gil_scoped_release nogil;
      code = Hooks()->call(method, in, authorization ? &*authorization : nullptr, deadline_s,
                           &out, &message);
    }
    return py11::make_tuple(code, message, py11::bytes(out));
  });
  py11::class_<ControlWatch>(m, "ControlWatch")
      // The next snapshot, serialized, when it is due; None once the stream ended.
      .def("next", &ControlWatch::Next)
      .def("cancel", &ControlWatch::Cancel)
      // Gives the stream's slot back now rather than at garbage collection.
      .def("close", &ControlWatch::Close);
  m.def("control_watch", [](py11::bytes request, std::optional<std::string> authorization) {
    const std::string in = request;
    int code = 0;
    std::string message;
    void* w;
    {
      py11::gil_scoped_release nogil;
      w = Hooks()->open_watch(in, authorization ? &*authorization : nullptr, &code, &message);
    }
    if (w == nullptr) return py11::make_tuple(code, message, py11::none());
    return py11::make_tuple(0, std::string(), py11::cast(std::make_unique<ControlWatch>(w)));
  });
}

// The calls made on every request of a busy service (the tracked
// executor's submit and work item, the interceptor's after-request) as
// plain CPython functions: through pybind11's dispatcher each cost 0.2-0.4
// us more (argument vectors, a life-support frame), 0.2 % of a grpcio
// request's CPU in a profile of bench/service_cost.sh's service.
PyObject* NoteWork(PyObject*, PyObject*) {
  State().threads().NoteWork();
  Py_RETURN_NONE;
}

PyObject* MarkRan(PyObject*, PyObject*) {
  State().threads().MarkRan();
  Py_RETURN_NONE;
}

// after_request(handler_s: float, error: bool)
PyObject* AfterRequest(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 2) {
    PyErr_Format(PyExc_TypeError, "after_request() takes 2 arguments (%zd given)", n);
    return nullptr;
  }
  const double handler_s = PyFloat_AsDouble(args[0]);
  if (handler_s == -1.0 && PyErr_Occurred()) return nullptr;
  const int error = PyObject_IsTrue(args[1]);
  if (error < 0) return nullptr;
  State().ObserveRequest(absl::Seconds(handler_s), error != 0);
  State().threads().Visit(false);
  Py_RETURN_NONE;
}

PyMethodDef kPerRequest[] = {
    {"note_work", NoteWork, METH_NOARGS, "a tracked executor got work"},
    {"mark_ran", MarkRan, METH_NOARGS, "this worker starts a work item"},
    {"after_request", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(AfterRequest)),
     METH_FASTCALL, "after_request(handler_s, error): counted, timed, a pending release's share"},
    {nullptr, nullptr, 0, nullptr},
};

// The one tables the Python half reads rather than copies.
void BindTables(py11::module_& m) {
  // The one table of trim modes (common/trim_modes.h): [(name, number)], for
  // rsslab.release(mode=).
  m.def("trim_modes", []() {
    py11::list modes;
    for (const TrimModeInfo& t : kTrimModes) {
      modes.append(py11::make_tuple(t.name, static_cast<int>(t.mode)));
    }
    return modes;
  });
  // The one list of phases (common/phase.h): "start" and the cycle's four.
  m.def("phases", []() {
    py11::list names;
    names.append(PhaseName(rsslab::v1::PHASE_START));
    for (rsslab::v1::Phase p : kCyclePhases) names.append(PhaseName(p));
    return names;
  });
}

}  // namespace

PYBIND11_MODULE(_rsslab, m) {
  m.doc() = "rsslab's native half (memory/alloc, memory/trim, memory/snapshot); use rsslab.";
  State().RegisterForkHandlers();
  RegisterControlForkHandlers();
  m.def("allocator", &AllocatorInfo);
  m.def("is_allocator_variable", &IsAllocatorVariable);
  // Text the package did not write (a callback's exception), escaped and cut
  // as everything rsslab echoes (common/untrusted_text.h).
  m.def("echo", [](const std::string& text, size_t max_bytes) { return Echo(text, max_bytes); });
  m.def("release", &Release);
  BindTables(m);
  m.def("snapshot", &Snapshot);
  m.def("cap_arenas", &CapArenas);
  m.def("set_thread_hooks", [](py11::object targets, py11::object submit) {
    State().threads().SetHooks(targets.ptr(), submit.ptr());
  });
  m.def("set_snapshot_hook", [](py11::object hook) { State().SetSnapshotHook(hook.ptr()); });
  m.def("visit", [](bool task) { return State().threads().Visit(task); });
  m.def("hold", []() { State().threads().Hold(); });
  m.def("count_request", [](uint64_t n) { State().CountRequests(n); });
  // note_work, mark_ran and the interceptor's after_request (counted and
  // timed, then this worker's share of a pending release, cheap when none
  // is): kPerRequest above.
  if (PyModule_AddFunctions(m.ptr(), kPerRequest) != 0) throw py11::error_already_set();
  m.def("requests", []() { return State().requests(); });
  m.def("start_auto_trim", &StartAutoTrim);
  // The one table of auto-trim modes and ranges (common/auto_trim_table.h),
  // for rsslab.auto_trim() and `python -m rsslab run --auto_trim`.
  m.def("auto_trim_modes", []() {
    py11::list modes;
    for (const AutoTrimModeEntry& e : AutoTrimModes()) modes.append(e.name);
    return modes;
  });
  m.def("auto_trim_ranges", []() {
    py11::dict ranges;
    for (const AutoTrimKnob& k : AutoTrimKnobs()) {
      ranges[k.keyword] = py11::make_tuple(k.lo, k.hi);
    }
    return ranges;
  });
  // ValueError naming `what` as the caller spelled it.
  m.def("check_auto_trim_mode", [](const std::string& mode, const std::string& what) {
    absl::StatusOr<AutoTrimMode> m = ParseAutoTrimMode(mode, what);
    if (!m.ok()) throw py11::value_error(std::string(m.status().message()));
  });
  m.def("check_auto_trim", [](const std::string& keyword, double value) {
    for (const AutoTrimKnob& k : AutoTrimKnobs()) {
      if (keyword != k.keyword) continue;
      absl::Status s = CheckAutoTrimValue(k, value, AutoTrimCaller::kPackage);
      if (!s.ok()) throw py11::value_error(std::string(s.message()));
      return;
    }
    throw py11::value_error(absl::StrCat("auto_trim() has no keyword argument ", keyword));
  });
  m.def("stop_auto_trim", []() {
    py11::gil_scoped_release nogil;
    State().StopAutoTrim();
  });
  m.def("auto_trim_state", []() { return State().AutoTrimInfo(); });
  m.def("set_phase_hook", [](py11::object hook) { SetPhaseHook(hook.ptr()); });
  BindControl(m);
  m.def("stop_serving", []() {
    py11::gil_scoped_release nogil;
    StopControl();
    StopMetrics();
  });
  m.def("serve_metrics", [](const std::string& address) {
    absl::StatusOr<std::string> r;
    {
      py11::gil_scoped_release nogil;
      r = StartMetrics(address);
    }
    if (!r.ok()) throw py11::value_error(std::string(r.status().message()));
    return *r;
  });
  m.def("shutdown", []() {
    MarkShuttingDown();
    {
      py11::gil_scoped_release nogil;
      StopControl();
      StopMetrics();
      State().Shutdown();
      Gil().Stop(absl::Seconds(1));  // the helper returns once our GIL is released
    }
    State().ClearHooks();
    ClearPhaseHook();
  });
}

}  // namespace py
}  // namespace rsslab
