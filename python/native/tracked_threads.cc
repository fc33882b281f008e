#include "python/native/tracked_threads.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/time/clock.h"

namespace rsslab {
namespace py {
namespace {

std::atomic<bool> g_shutting_down{false};
thread_local absl::Duration t_call_timeout = absl::InfiniteDuration();
// This thread since its last share: unknown (never visited, or a reused
// tid), clean (ran no work since), dirty.
// Read on every work item (MarkRan): initial-exec, so an access is one
// load off the thread pointer, not a __tls_get_addr call as the default
// model of a shared object has it (0.2 % of a busy service's CPU); two bytes
// of the static TLS glibc keeps spare for libraries loaded later.
enum class HeapState : char { kUnknown, kClean, kDirty };
__attribute__((tls_model("initial-exec"))) thread_local HeapState t_heap = HeapState::kUnknown;
// Set when a NoteWork released this thread from a hold: it goes for that
// work, so it holds no more until it has started a work item (MarkRan),
// passing any visit task it meets on the way back into the queue.
__attribute__((tls_model("initial-exec"))) thread_local bool t_answering = false;

int Tid() { return static_cast<int>(syscall(SYS_gettid)); }

// The Python error as one stderr line: a hook that raises must not throw
// through a native thread.
void ReportPythonError(const char* what) {
  if (!PyErr_Occurred()) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject* s = value ? PyObject_Str(value) : nullptr;
  const char* msg = s ? PyUnicode_AsUTF8(s) : nullptr;
  std::fprintf(stderr, "rsslab: %s raised: %s\n", what, msg ? msg : "(unprintable)");
  PyErr_Clear();
  Py_XDECREF(s);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
}

}  // namespace

void MarkShuttingDown() { g_shutting_down.store(true); }
bool ShuttingDown() { return g_shutting_down.load(); }

bool WithGil(const std::function<void()>& fn) {
  // Taking the GIL during finalization ends a foreign thread (3.11 calls
  // pthread_exit on it); the atexit handler stops every native thread
  // before that, and this check covers a caller that raced it.
#if PY_VERSION_HEX >= 0x030D0000
  // 3.13 made it public as Py_IsFinalizing and removed the private name.
  if (ShuttingDown() || !Py_IsInitialized() || Py_IsFinalizing()) return false;
#else
  if (ShuttingDown() || !Py_IsInitialized() || _Py_IsFinalizing()) return false;
#endif
  PyGILState_STATE st = PyGILState_Ensure();
  fn();
  PyGILState_Release(st);
  return true;
}

void TrackedThreads::SetCallTimeout(absl::Duration d) { t_call_timeout = d; }

void TrackedThreads::SetHooks(PyObject* targets, PyObject* submit) {
  Py_XINCREF(targets);
  Py_XINCREF(submit);
  Py_XDECREF(targets_);
  Py_XDECREF(submit_);
  targets_ = targets;
  submit_ = submit;
}

void TrackedThreads::Close() {
  Abort();
  Py_CLEAR(targets_);
  Py_CLEAR(submit_);
}

void TrackedThreads::Abort() {
  absl::MutexLock l(&mu_);
  if (pass_) pass_->open = false;
  pass_.reset();
  active_.store(false);
}

bool TrackedThreads::ListTargets(std::vector<int>* out) {
  std::vector<int>& tids = *out;
  return WithGil([&] {
    if (targets_ == nullptr) return;
    PyObject* list = PyObject_CallNoArgs(targets_);
    if (list == nullptr) {
      ReportPythonError("the tracked threads' list");
      return;
    }
    PyObject* seq = PySequence_Fast(list, "targets() must return a list");
    if (seq != nullptr) {
      for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
        long tid = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));  // NOLINT(runtime/int)
        if (tid > 0) tids.push_back(static_cast<int>(tid));
      }
      PyErr_Clear();
      Py_DECREF(seq);
    } else {
      ReportPythonError("the tracked threads' list");
    }
    Py_DECREF(list);
  });
}

long TrackedThreads::SubmitVisits(const std::vector<int>& owing) {  // NOLINT(runtime/int)
  long submitted = -1;  // NOLINT(runtime/int)
  WithGil([&] {
    if (submit_ == nullptr) return;
    PyObject* list = PyList_New(static_cast<Py_ssize_t>(owing.size()));
    if (list == nullptr) {
      ReportPythonError("submitting the visit tasks");
      return;
    }
    for (size_t i = 0; i < owing.size(); ++i) {
      PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), PyLong_FromLong(owing[i]));
    }
    PyObject* r = PyObject_CallOneArg(submit_, list);
    Py_DECREF(list);
    if (r == nullptr) {
      ReportPythonError("submitting the visit tasks");
      return;
    }
    if (PyLong_Check(r)) submitted = PyLong_AsLong(r);
    PyErr_Clear();
    Py_DECREF(r);
  });
  return submitted;
}

std::vector<WorkerRun> TrackedThreads::RunOnEachWorker(std::function<void(int)> fn,
                                                        absl::Duration timeout) {
  timeout = std::min(timeout, t_call_timeout);
  if (refusing_.load()) return {};
  std::vector<int> tids;
  const bool got = ListTargets(&tids);
  std::sort(tids.begin(), tids.end());
  tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
  last_targets_.store(static_cast<int>(tids.size()));
  if (!got || tids.empty()) return {};

  auto p = std::make_shared<Pass>();
  p->fn = std::move(fn);
  p->runs.resize(tids.size());
  p->started.assign(tids.size(), false);
  std::vector<int> owing;
  {
    absl::MutexLock l(&clean_mu_);
    for (size_t i = 0; i < tids.size(); ++i) {
      p->index_of_tid[tids[i]] = static_cast<int>(i);
      p->runs[i].worker = static_cast<int>(i);
      p->runs[i].tid = tids[i];
      if (clean_.count(tids[i]) != 0) {
        p->started[i] = true;  // nothing to release since its last share
        p->runs[i].ran = true;
      } else {
        owing.push_back(tids[i]);
      }
    }
  }
  last_clean_.store(static_cast<int>(tids.size() - owing.size()));
  if (owing.empty()) return p->runs;
  p->pending = static_cast<int>(owing.size());
  // A task taken by a thread that owed nothing may go back into the
  // queue; bounded, for a thread that never comes free.
  p->resubmits_left = static_cast<int>(owing.size());
  // What submit() will put in (one per owing worker); corrected by what it
  // says it did, since a task may start before it returns.
  p->submitted = static_cast<int>(owing.size());
  p->deadline = absl::Now() + timeout;
  {
    absl::MutexLock l(&mu_);
    if (refusing_.load()) return {};
    if (pass_) pass_->open = false;  // one pass at a time (the Trimmer serializes)
    pass_ = p;
    active_.store(true);
  }
  const long submitted = SubmitVisits(owing);  // NOLINT(runtime/int)
  if (submitted >= 0) {
    absl::MutexLock l(&mu_);
    p->submitted += static_cast<int>(submitted) - static_cast<int>(owing.size());
  }
  // The caller may itself be a tracked worker (release() from a handler):
  // it cannot take a visit task while it waits here, so it goes first.
  auto self = p->index_of_tid.find(Tid());
  if (self != p->index_of_tid.end()) {
    {
      absl::MutexLock l(&mu_);
      p->started[self->second] = true;
    }
    absl::Time t0 = absl::Now();
    p->fn(self->second);
    MarkClean();
    absl::MutexLock l(&mu_);
    p->runs[self->second].ran = true;
    p->runs[self->second].pause = absl::Now() - t0;
    --p->pending;
  }
  absl::MutexLock l(&mu_);
  Pass* raw = p.get();
  mu_.AwaitWithDeadline(
      absl::Condition(+[](Pass* x) { return x->pending == 0 || !x->open; }, raw), p->deadline);
  p->open = false;
  if (pass_ == p) {
    pass_.reset();
    active_.store(false);
  }
  return p->runs;
}

void TrackedThreads::HoldLocked(const std::shared_ptr<Pass>& p) {
  Pass* raw = p.get();
  auto released = +[](Pass* x) {
    return x->pending == 0 || !x->open || x->taken >= x->submitted;
  };
  mu_.AwaitWithDeadline(
      absl::Condition(+[](Pass* x) { return x->pending == 0 || !x->open ||
                                            x->taken >= x->submitted || x->work > 0; },
                      raw),
      p->deadline);
  // Work the service submitted needs one worker: this one goes, the other
  // held workers stay (all of them waking would only take the visit tasks
  // off the queue again).
  if (!released(raw) && raw->work > 0) {
    --raw->work;
    t_answering = true;
  }
}

void TrackedThreads::Hold() {
  if (!active_.load(std::memory_order_relaxed) || t_answering) return;
  Py_BEGIN_ALLOW_THREADS;
  {
    absl::MutexLock l(&mu_);
    std::shared_ptr<Pass> p = pass_;
    if (p && p->open) HoldLocked(p);
  }
  Py_END_ALLOW_THREADS;
}

void TrackedThreads::MarkClean() {
  t_heap = HeapState::kClean;
  absl::MutexLock l(&clean_mu_);
  clean_.insert(Tid());
}

void TrackedThreads::MarkRan() {
  t_answering = false;
  if (t_heap == HeapState::kDirty) return;  // the common case: no lock
  t_heap = HeapState::kDirty;
  absl::MutexLock l(&clean_mu_);
  clean_.erase(Tid());
}

void TrackedThreads::NoteWork() {
  if (!active_.load(std::memory_order_relaxed)) return;
  absl::MutexLock l(&mu_);  // wakes a held worker
  if (pass_) ++pass_->work;
}

bool TrackedThreads::Visit(bool task) {
  // The interceptor calls this after every request: no pass, no cost.
  if (!active_.load(std::memory_order_relaxed)) return false;
  bool resubmit = false;
  Py_BEGIN_ALLOW_THREADS;
  {
    const int tid = Tid();
    absl::MutexLock l(&mu_);
    std::shared_ptr<Pass> p = pass_;
    if (p && p->open && absl::Now() < p->deadline) {
      if (task) ++p->taken;
      auto it = p->index_of_tid.find(tid);
      bool hold = task && !t_answering;
      if (it != p->index_of_tid.end() && !p->started[it->second]) {
        const int i = it->second;
        p->started[i] = true;
        mu_.Unlock();
        absl::Time t0 = absl::Now();
        p->fn(i);
        absl::Duration pause = absl::Now() - t0;
        MarkClean();
        mu_.Lock();
        p->runs[i].ran = p->open;  // past the deadline it counts as not reached
        p->runs[i].pause = pause;
        --p->pending;
      } else if (task && p->pending > 0 && p->taken >= p->submitted && p->resubmits_left > 0) {
        // This thread owed nothing and no visit task is left in the queue:
        // the task goes back in (the caller puts it there, then holds) for
        // an idle thread that still owes. Never while others are queued:
        // visit tasks going round the queue ahead of the service's work
        // held every request up (seconds, at 64 workers under load).
        --p->resubmits_left;
        ++p->submitted;
        resubmit = true;
        hold = false;
      }
      // Off the queue while tasks of the pass are still in it, so that they
      // go to other threads; one held worker back to it for each piece of
      // work the service submits meanwhile.
      if (hold) HoldLocked(p);
    }
  }
  Py_END_ALLOW_THREADS;
  return resubmit;
}

}  // namespace py
}  // namespace rsslab
