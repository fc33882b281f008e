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
  if (ShuttingDown() || !Py_IsInitialized() || _Py_IsFinalizing()) return false;
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

void TrackedThreads::ArmNextPass(std::function<void()> extra) {
  absl::MutexLock l(&mu_);
  next_extra_ = std::move(extra);
}

std::vector<WorkerRun> TrackedThreads::RunOnEachWorker(std::function<void(int)> fn,
                                                        absl::Duration timeout) {
  timeout = std::min(timeout, t_call_timeout);
  std::function<void()> extra;
  {
    absl::MutexLock l(&mu_);
    extra = std::move(next_extra_);
    next_extra_ = nullptr;
  }
  if (extra) {
    fn = [fn = std::move(fn), extra = std::move(extra)](int worker) {
      fn(worker);
      extra();
    };
  }
  if (refusing_.load()) return {};
  std::vector<int> tids;
  bool got = WithGil([&] {
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
  std::sort(tids.begin(), tids.end());
  tids.erase(std::unique(tids.begin(), tids.end()), tids.end());
  last_targets_.store(static_cast<int>(tids.size()));
  if (!got || tids.empty()) return {};

  auto p = std::make_shared<Pass>();
  p->fn = std::move(fn);
  p->runs.resize(tids.size());
  p->started.assign(tids.size(), false);
  for (size_t i = 0; i < tids.size(); ++i) {
    p->index_of_tid[tids[i]] = static_cast<int>(i);
    p->runs[i].worker = static_cast<int>(i);
    p->runs[i].tid = tids[i];
  }
  p->pending = static_cast<int>(tids.size());
  p->resubmits_left = static_cast<int>(tids.size());
  p->deadline = absl::Now() + timeout;
  {
    absl::MutexLock l(&mu_);
    if (refusing_.load()) return {};
    if (pass_) pass_->open = false;  // one pass at a time (the Trimmer serializes)
    pass_ = p;
    active_.store(true);
  }
  WithGil([&] {
    if (submit_ == nullptr) return;
    PyObject* r = PyObject_CallNoArgs(submit_);
    if (r == nullptr) ReportPythonError("submitting the visit tasks");
    Py_XDECREF(r);
  });
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

bool TrackedThreads::Visit(bool barrier) {
  // The interceptor calls this after every request: no pass, no cost.
  if (!active_.load(std::memory_order_relaxed)) return false;
  bool resubmit = false;
  Py_BEGIN_ALLOW_THREADS;
  {
    const int tid = Tid();
    absl::MutexLock l(&mu_);
    std::shared_ptr<Pass> p = pass_;
    if (p && p->open && absl::Now() < p->deadline) {
      auto it = p->index_of_tid.find(tid);
      if (it != p->index_of_tid.end() && !p->started[it->second]) {
        const int i = it->second;
        p->started[i] = true;
        mu_.Unlock();
        absl::Time t0 = absl::Now();
        p->fn(i);
        absl::Duration pause = absl::Now() - t0;
        mu_.Lock();
        p->runs[i].ran = p->open;  // past the deadline it counts as not reached
        p->runs[i].pause = pause;
        --p->pending;
      } else if (barrier && p->pending > 0 && p->resubmits_left > 0) {
        --p->resubmits_left;
        resubmit = true;
      }
      if (barrier) {
        Pass* raw = p.get();
        mu_.AwaitWithDeadline(
            absl::Condition(+[](Pass* x) { return x->pending == 0 || !x->open; }, raw),
            p->deadline);
      }
    }
  }
  Py_END_ALLOW_THREADS;
  return resubmit;
}

}  // namespace py
}  // namespace rsslab
