// The threads of the Python pools a service registered with rsslab.track():
// a ThreadSet, so the Trimmer's per-thread pass (jemalloc's tcache flush,
// mimalloc's heap collect, tcmalloc's thread cache) runs on each of them.
//
// A pass reaches a thread in one of two ways, whichever comes first:
//   - a visit task: RunOnEachWorker asks Python (the `submit` hook) to put
//     one task per live worker into each tracked executor; a task runs the
//     release if its thread still owes one, then waits (without the GIL)
//     until every thread has, so that no worker takes two tasks;
//   - right after a request: the gRPC interceptor calls Visit(false) on the
//     worker that just served one.
// Threads still busy at the deadline are reported (ran = false) and skipped:
// a late visit finds the pass closed and does nothing.
//
// Example:
//   TrackedThreads threads;
//   threads.SetHooks(targets_fn, submit_fn);  // Python callables
//   Trimmer trimmer(&threads);
//   trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "manual");  // GIL released
//   ...on a worker thread, GIL held:  threads.Visit(/*barrier=*/true);

#ifndef RSSLAB_PYTHON_NATIVE_TRACKED_THREADS_H_
#define RSSLAB_PYTHON_NATIVE_TRACKED_THREADS_H_

#include <Python.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "memory/trim/thread_set.h"

namespace rsslab {
namespace py {

// Runs `fn` holding the GIL from any thread (one without a Python thread
// state included). False, without running it, once the interpreter is
// finalizing or gone: a thread must then never try to take the GIL.
bool WithGil(const std::function<void()>& fn);
// Set by the package's atexit handler, before finalization begins.
void MarkShuttingDown();
bool ShuttingDown();

class TrackedThreads : public ThreadSet {
 public:
  TrackedThreads() = default;
  ~TrackedThreads() override = default;

  // targets() -> list of native thread ids; submit() -> None. New
  // references are taken; GIL held.
  void SetHooks(PyObject* targets, PyObject* submit);
  // Drops the hooks (GIL held) and ends a pass in progress.
  void Close();

  std::vector<WorkerRun> RunOnEachWorker(std::function<void(int worker)> fn,
                                         absl::Duration timeout) override;

  // On a Python thread, GIL held (released while running or waiting).
  // Runs the pass's function if this thread owes it. barrier: then waits
  // until the pass ends; returns true if the caller should put one more
  // visit task into its executor (this one went to a thread that owed
  // nothing while some thread still does).
  bool Visit(bool barrier);

  // Ends a pass in progress now (its waiting threads return).
  void Abort();
  // While refusing, passes return at once with no thread reached (stopping
  // the automatic trim, shutdown).
  void Refuse(bool refuse) { refusing_.store(refuse); }

  // The next pass runs `extra` on each thread right after the pass's own
  // function (the package's free-block purge after mimalloc's collect);
  // nullptr disarms it.
  void ArmNextPass(std::function<void()> extra);

  // Caps the next passes' wait on the calling thread (release(timeout=)).
  static void SetCallTimeout(absl::Duration d);

  // Thread ids of the last targets() call (for reports).
  int last_target_count() const { return last_targets_.load(); }

 private:
  struct Pass {
    std::function<void(int)> fn;
    std::map<int, int> index_of_tid;  // tid -> index in runs
    std::vector<WorkerRun> runs;
    std::vector<bool> started;
    int pending = 0;
    int resubmits_left = 0;
    bool open = true;
    absl::Time deadline;
  };

  absl::Mutex mu_;
  std::shared_ptr<Pass> pass_ ABSL_GUARDED_BY(mu_);
  std::function<void()> next_extra_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> active_{false};
  std::atomic<bool> refusing_{false};
  std::atomic<int> last_targets_{0};
  // Owned references, touched only with the GIL held.
  PyObject* targets_ = nullptr;
  PyObject* submit_ = nullptr;
};

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_TRACKED_THREADS_H_
