// A fixed pool of named OS threads that run submitted tasks.
//
// The server's Python handler runs only on these threads; gRPC's threads
// hand work over with Submit(). Each thread is named `<prefix><index>` so
// /proc/PID/task/*/comm tells workers from everything else, and each can be
// reached between tasks with RunOnEachWorker() (the per-thread trim needs
// that: some allocators only release a thread's cache from that thread).
// With `churn_every` > 0 a worker's OS thread is replaced by a fresh one
// after that many tasks, reproducing thread churn (seed 002). With
// `churn_overlap` > 0 the replaced thread stays alive (idle, still attached
// to its glibc arena) for that long after its successor started serving,
// as executor threads and per-request threads do in real services; glibc
// then cannot hand the successor the old thread's arena and creates new
// ones up to its cap. Without overlap the successor joins its predecessor
// before its first allocation and inherits the freed arena.
//
// Example:
//   WorkerPoolOptions options;
//   options.threads = 4;
//   options.on_thread_start = [](int worker) { /* attach interpreter */ };
//   WorkerPool pool(options);
//   pool.Start();
//   pool.Submit([](int worker) { /* work */ });
//   auto report = pool.RunOnEachWorker([](int) { /* release */ },
//                                      absl::Seconds(5));
//   pool.Stop();  // finishes queued tasks, joins every thread

#ifndef RSSLAB_SERVER_WORKERS_WORKER_POOL_H_
#define RSSLAB_SERVER_WORKERS_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "memory/trim/thread_set.h"

namespace rsslab {

struct WorkerPoolOptions {
  // Number of worker threads; fixed for the pool's life.
  int threads = 4;
  // Thread name prefix; names are truncated to 15 bytes by the kernel.
  std::string name_prefix = "rsslab-w";
  // > 0: replace a worker's OS thread after this many tasks (thread churn).
  int churn_every = 0;
  // Churn: how long a replaced thread lingers after its successor starts.
  // Zero: the successor starts only after the predecessor exited.
  absl::Duration churn_overlap = absl::ZeroDuration();
  // Churn: at most this many replaced threads linger at once; past it a
  // replacement waits for its predecessor to exit (bounds the threads a
  // fast churn can pile up).
  int max_lingering = 256;
  // Run first and last on every OS thread the pool starts (replacements
  // included), on that thread.
  std::function<void(int worker)> on_thread_start;
  std::function<void(int worker)> on_thread_exit;
};

// One worker's state, for snapshots.
struct WorkerInfo {
  int worker = 0;
  int tid = 0;
  bool busy = false;
  absl::Duration busy_for;
  uint64_t served = 0;
  uint32_t generation = 0;
};

struct WorkerPoolStats {
  int configured = 0;
  int alive = 0;
  int busy = 0;
  // Replaced threads still alive (churn overlap).
  int lingering = 0;
  uint64_t threads_started = 0;
  int64_t queue_depth = 0;
  std::vector<WorkerInfo> workers;
};

class WorkerPool : public ThreadSet {
 public:
  using Task = std::function<void(int worker)>;

  explicit WorkerPool(WorkerPoolOptions options);
  ~WorkerPool() override;  // Stop()
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Start();

  // Queues a task for any worker. Returns false once Stop() has begun.
  bool Submit(Task task);

  // Runs `fn` once on every worker thread, ahead of queued tasks, between
  // tasks; waits up to `timeout` for all of them. A worker stuck in a task
  // reports ran=false (and runs `fn` later, when it gets free).
  std::vector<WorkerRun> RunOnEachWorker(std::function<void(int worker)> fn,
                                         absl::Duration timeout) override;

  // Finishes queued tasks, then joins every thread. Idempotent.
  void Stop();

  WorkerPoolStats Stats() const;
  int size() const { return options_.threads; }

 private:
  struct Broadcast;
  struct Slot {
    std::thread thread;
    std::deque<std::shared_ptr<Broadcast>> private_queue;
    int tid = 0;
    bool alive = false;
    bool busy = false;
    absl::Time busy_since;
    uint64_t served = 0;
    uint32_t generation = 0;
  };

  // A replaced thread lingering (or exiting) on its own; joined once done,
  // by the next replacement or by Stop().
  struct Retired {
    std::thread thread;
    bool done = false;
  };

  // `overlap`: the current thread keeps running (it lingers) and goes to
  // retired_; otherwise the new thread joins it before starting. Returns
  // retired threads that are done, for the caller to join unlocked.
  std::vector<std::thread> SpawnLocked(int slot, bool overlap)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(int slot, std::thread predecessor);
  void RunBroadcast(int slot, const std::shared_ptr<Broadcast>& b);

  const WorkerPoolOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar work_cv_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t threads_started_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Retired> retired_ ABSL_GUARDED_BY(mu_);
  int lingering_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_WORKERS_WORKER_POOL_H_
