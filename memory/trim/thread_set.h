// A set of threads that can each run a function: what the per-thread part of
// a trim needs, since jemalloc's tcache, mimalloc's thread heap and
// tcmalloc's thread cache can only be released from their own thread.
// The server's WorkerPool is one; the Python package's tracked executor
// threads are another.
//
// Example:
//   class MyThreads : public ThreadSet {
//    public:
//     std::vector<WorkerRun> RunOnEachWorker(std::function<void(int)> fn,
//                                            absl::Duration timeout) override;
//   };
//   Trimmer trimmer(&my_threads);  // the per-thread pass runs fn on each

#ifndef RSSLAB_MEMORY_TRIM_THREAD_SET_H_
#define RSSLAB_MEMORY_TRIM_THREAD_SET_H_

#include <functional>
#include <vector>

#include "absl/time/time.h"

namespace rsslab {

// What happened on one thread during RunOnEachWorker().
struct WorkerRun {
  int worker = 0;  // the thread's index in the set
  int tid = 0;
  bool ran = false;
  // Time the thread spent in the function (it served nothing meanwhile).
  absl::Duration pause;
};

class ThreadSet {
 public:
  virtual ~ThreadSet() = default;
  // Runs `fn(index)` once on every thread of the set, on that thread, and
  // waits at most `timeout` for all of them. One entry per thread; a thread
  // that did not get to it in time reports ran = false (it may run `fn`
  // later, so `fn` must only touch state it owns or shares by value).
  virtual std::vector<WorkerRun> RunOnEachWorker(std::function<void(int worker)> fn,
                                                 absl::Duration timeout) = 0;
};

}  // namespace rsslab

#endif  // RSSLAB_MEMORY_TRIM_THREAD_SET_H_
