#include "server/workers/worker_pool.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

namespace rsslab {

struct WorkerPool::Broadcast {
  std::function<void(int)> fn;
  std::vector<WorkerRun> runs;  // guarded by the pool's mu_
  int pending = 0;              // guarded by the pool's mu_
};

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(std::move(options)) {}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Start() {
  absl::MutexLock lock(&mu_);
  if (started_) return;
  started_ = true;
  slots_.resize(options_.threads);
  for (int i = 0; i < options_.threads; ++i) SpawnLocked(i, /*overlap=*/false);
}

std::vector<std::thread> WorkerPool::SpawnLocked(int slot, bool overlap) {
  Slot& s = slots_[slot];
  // Without overlap the new thread joins the one it replaces before doing
  // anything, so nobody else has to; with overlap the old one is in
  // retired_ already.
  std::thread predecessor;
  if (!overlap) predecessor = std::move(s.thread);
  ++threads_started_;
  s.thread = std::thread(&WorkerPool::Run, this, slot, std::move(predecessor));
  std::vector<std::thread> done;
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (it->done) {
      done.push_back(std::move(it->thread));
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  return done;
}

bool WorkerPool::Submit(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return false;
  queue_.push_back(std::move(task));
  work_cv_.Signal();
  return true;
}

void WorkerPool::RunBroadcast(int slot, const std::shared_ptr<Broadcast>& b) {
  absl::Time start = absl::Now();
  b->fn(slot);
  absl::Duration took = absl::Now() - start;
  absl::MutexLock lock(&mu_);
  WorkerRun& r = b->runs[slot];
  r.ran = true;
  r.tid = slots_[slot].tid;
  r.pause = took;
  --b->pending;
}

void WorkerPool::Run(int slot, std::thread predecessor) {
  if (predecessor.joinable()) predecessor.join();
  std::string name = options_.name_prefix + std::to_string(slot);
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
  const int tid = static_cast<int>(syscall(SYS_gettid));
  if (options_.on_thread_start) options_.on_thread_start(slot);
  uint64_t served_here = 0;
  bool replaced = false;
  bool linger = false;
  std::list<Retired>::iterator retired;
  {
    absl::MutexLock lock(&mu_);
    slots_[slot].tid = tid;
    slots_[slot].alive = true;
  }
  while (true) {
    std::shared_ptr<Broadcast> broadcast;
    Task task;
    {
      absl::MutexLock lock(&mu_);
      Slot* s = &slots_[slot];
      while (!stopping_ && queue_.empty() && s->private_queue.empty()) {
        work_cv_.Wait(&mu_);
      }
      if (!s->private_queue.empty()) {
        broadcast = std::move(s->private_queue.front());
        s->private_queue.pop_front();
      } else if (!queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
        s->busy = true;
        s->busy_since = absl::Now();
      } else {
        break;  // stopping and drained
      }
    }
    if (broadcast) {
      RunBroadcast(slot, broadcast);
      continue;
    }
    task(slot);
    ++served_here;
    std::vector<std::thread> reap;
    {
      absl::MutexLock lock(&mu_);
      Slot& s = slots_[slot];
      s.busy = false;
      ++s.served;
      if (options_.churn_every > 0 &&
          served_here >= static_cast<uint64_t>(options_.churn_every) && !stopping_) {
        // Hand the slot (and its pending broadcasts) to a fresh OS thread.
        ++s.generation;
        s.alive = false;
        replaced = true;
        linger = options_.churn_overlap > absl::ZeroDuration() &&
                 lingering_ < options_.max_lingering;
        if (linger) {
          retired = retired_.emplace(retired_.end());
          retired->thread = std::move(s.thread);
          ++lingering_;
        }
        reap = SpawnLocked(slot, linger);
      }
    }
    // Threads that finished lingering: done, so these joins are short.
    for (std::thread& t : reap) t.join();
    if (replaced) break;
  }
  if (linger) {
    // Alive and idle, like an executor thread nobody shut down yet: the
    // thread keeps its arena while its successor allocates. Stop() ends
    // the wait early.
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.churn_overlap);
    --lingering_;
  }
  if (options_.on_thread_exit) options_.on_thread_exit(slot);
  absl::MutexLock lock(&mu_);
  if (linger) retired->done = true;
  // A replacement may already have marked itself alive; only a final exit
  // (on Stop) clears the flag.
  if (stopping_ && !replaced) slots_[slot].alive = false;
}

std::vector<WorkerRun> WorkerPool::RunOnEachWorker(std::function<void(int)> fn,
                                                   absl::Duration timeout) {
  auto b = std::make_shared<Broadcast>();
  b->fn = std::move(fn);
  absl::MutexLock lock(&mu_);
  b->runs.resize(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    b->runs[i].worker = static_cast<int>(i);
    b->runs[i].tid = slots_[i].tid;
  }
  if (stopping_ || slots_.empty()) return b->runs;
  b->pending = static_cast<int>(slots_.size());
  for (Slot& s : slots_) s.private_queue.push_back(b);
  work_cv_.SignalAll();
  Broadcast* raw = b.get();
  mu_.AwaitWithTimeout(
      absl::Condition(
          +[](Broadcast* x) { return x->pending == 0; }, raw),
      timeout);
  return b->runs;
}

void WorkerPool::Stop() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && slots_.empty()) return;
    stopping_ = true;
    work_cv_.SignalAll();
    // No replacements are spawned once stopping_ is set, so each slot's
    // current thread is its last (and joins its predecessors).
    for (Slot& s : slots_) threads.push_back(std::move(s.thread));
    // Lingering threads wake on stopping_; their entries stay until they
    // are joined (each marks its own done on the way out).
    for (Retired& r : retired_) threads.push_back(std::move(r.thread));
  }
  for (std::thread& t : threads) {
    if (t.joinable()) t.join();
  }
  absl::MutexLock lock(&mu_);
  retired_.clear();
}

WorkerPoolStats WorkerPool::Stats() const {
  absl::MutexLock lock(&mu_);
  WorkerPoolStats st;
  st.configured = options_.threads;
  st.threads_started = threads_started_;
  st.lingering = lingering_;
  st.queue_depth = static_cast<int64_t>(queue_.size());
  absl::Time now = absl::Now();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    WorkerInfo w;
    w.worker = static_cast<int>(i);
    w.tid = s.tid;
    w.busy = s.busy;
    w.busy_for = s.busy ? now - s.busy_since : absl::ZeroDuration();
    w.served = s.served;
    w.generation = s.generation;
    if (s.alive) ++st.alive;
    if (s.busy) ++st.busy;
    st.workers.push_back(w);
  }
  return st;
}

}  // namespace rsslab
