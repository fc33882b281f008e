// The threads of the Python pools a service registered with rsslab.track():
// a ThreadSet, so the Trimmer's per-thread pass (jemalloc's tcache flush,
// mimalloc's heap collect, tcmalloc's thread cache) runs on each of them.
//
// A pass visits only the threads that ran work of the service since their
// last visit (MarkRan; the others' heaps have not changed) and reaches
// each in one of two ways, whichever comes first:
//   - a visit task: RunOnEachWorker asks Python (the `submit` hook) to put
//     one task per owing worker into its executor's queue; a task runs the
//     release if its thread still owes one; one taken by a thread that owed
//     nothing goes back into the queue only when no other is left in it.
//     A worker that took one is then held off the
//     queue (without the GIL) while visit tasks are still in it, so that
//     they go to other threads, but one held worker goes back for each
//     piece of work the service submits meanwhile (NoteWork, the tracked
//     executors' submit): holding every worker until all were done stalled
//     serving for about 100 ms at 64 workers on 2 cores (docs/PACKAGE.md,
//     "Measured");
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
//   ...on a worker thread, GIL held:  threads.Visit(/*task=*/true);

#ifndef RSSLAB_PYTHON_NATIVE_TRACKED_THREADS_H_
#define RSSLAB_PYTHON_NATIVE_TRACKED_THREADS_H_

#include <Python.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
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

  // targets() -> list of native thread ids; submit(tids) -> the number of
  // visit tasks it submitted (one per listed thread, into its executor).
  // New references are taken; GIL held.
  void SetHooks(PyObject* targets, PyObject* submit);
  // Borrowed (a forked child's fresh state takes them over).
  PyObject* targets_hook() const { return targets_; }
  PyObject* submit_hook() const { return submit_; }
  // Drops the hooks (GIL held) and ends a pass in progress.
  void Close();

  std::vector<WorkerRun> RunOnEachWorker(std::function<void(int worker)> fn,
                                         absl::Duration timeout) override;

  // On a Python thread, GIL held (released while running or waiting).
  // Runs the pass's function if this thread owes it. task: the call is a
  // visit task (not the interceptor): it is counted as taken, and the
  // worker is then held as Hold() does. Returns true if the caller should
  // put the visit task back into its executor and then call Hold(): it
  // went to a thread that owed nothing, no other is queued, and some
  // thread still owes.
  bool Visit(bool task);
  // GIL held (released while waiting). Waits until no visit task of the
  // pass is queued, the pass ends, or the service submits work that no
  // other held worker has gone back for.
  void Hold();
  // The service submitted work to a tracked executor (a request): held
  // workers go back to their queue. One atomic load when no pass runs.
  void NoteWork();
  // On a tracked worker, as it starts a work item of the service: its heap
  // may change, so the next pass visits it. A worker that ran nothing
  // since its share of a pass is counted as reached without a visit: its
  // heap has not changed (blocks other threads freed into its pages wait
  // for its next collect). Under a steady load with a release every 2 s
  // most of a large pool ran nothing in between; visiting each of them
  // cost a task, a wakeup and a collect per worker, on 2 cores.
  void MarkRan();
  // Workers the last pass counted as reached without a visit.
  int last_clean_count() const { return last_clean_.load(); }

  // Ends a pass in progress now (its waiting threads return).
  void Abort();
  // While refusing, passes return at once with no thread reached (stopping
  // the automatic trim, shutdown).
  void Refuse(bool refuse) { refusing_.store(refuse); }

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
    int submitted = 0;  // visit tasks put into the executors
    int taken = 0;      // visit tasks a worker has started
    int work = 0;       // NoteWork calls not yet answered by a held worker
    bool open = true;
    absl::Time deadline;
  };

  // mu_ held: waits until the pass ends, no task of it is queued, or work
  // is submitted (then this worker answers it: one per NoteWork).
  void HoldLocked(const std::shared_ptr<Pass>& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::shared_ptr<Pass> pass_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> active_{false};
  std::atomic<bool> refusing_{false};
  std::atomic<int> last_targets_{0};
  std::atomic<int> last_clean_{0};
  // Threads whose share of a pass ran and that started no work since.
  absl::Mutex clean_mu_;
  std::set<int> clean_ ABSL_GUARDED_BY(clean_mu_);
  void MarkClean();  // on the thread whose share just ran
  // With the GIL: the targets() hook's thread ids; false if Python is gone.
  bool ListTargets(std::vector<int>* tids);
  // With the GIL: submit(owing); what it says it submitted, -1 on error.
  long SubmitVisits(const std::vector<int>& owing);  // NOLINT(runtime/int)
  // Owned references, touched only with the GIL held.
  PyObject* targets_ = nullptr;
  PyObject* submit_ = nullptr;
};

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_TRACKED_THREADS_H_
