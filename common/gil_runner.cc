#include "common/gil_runner.h"

#include <pthread.h>

#include <algorithm>
#include <deque>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/thread_signals.h"

namespace rsslab {
namespace {

struct Job {
  // kAbandoned: its caller gave up while it waited for the GIL, or the
  // runner stopped first; the helper never runs it.
  enum State { kPending, kRunning, kDone, kAbandoned };
  absl::Mutex mu;
  State state ABSL_GUARDED_BY(mu) = kPending;
  std::function<void()> fn;
  // When its caller queued it: the GIL wait a later caller would queue
  // behind counts from here, not from when the helper (perhaps late, on a
  // busy machine) took it up.
  absl::Time queued_at = absl::Now();
};

}  // namespace

struct GilRunner::State : std::enable_shared_from_this<GilRunner::State> {
  explicit State(GilRunnerOptions o) : options(std::move(o)) {}
  void StartLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // False with `why` set when a call must not queue.
  bool MayQueue(absl::Duration timeout, std::string* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  void Loop();
  void RunOne(Job* job);
  bool ShuttingDown() const { return options.shutting_down && options.shutting_down(); }
  std::string Context() const {
    return options.context ? options.context() : "the sections that need no Python are filled";
  }

  const GilRunnerOptions options;
  absl::Mutex mu;
  std::deque<std::shared_ptr<Job>> queue ABSL_GUARDED_BY(mu);
  // The job the helper is taking the GIL for, or running, while it does.
  std::shared_ptr<Job> current ABSL_GUARDED_BY(mu);
  std::thread::id helper ABSL_GUARDED_BY(mu);
  bool started ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;
  bool exited ABSL_GUARDED_BY(mu) = false;
};

GilRunner::GilRunner(GilRunnerOptions options)
    : state_(std::make_shared<State>(std::move(options))) {}

GilRunner::~GilRunner() { Stop(absl::InfiniteDuration()); }

void GilRunner::Start() {
  absl::MutexLock l(&state_->mu);
  if (!state_->stopping) state_->StartLocked();
}

void GilRunner::State::StartLocked() {
  if (started) return;
  started = true;
  // The thread holds the state, so a Stop() that stopped waiting for it
  // leaves nothing dangling. It never runs the process's signal handlers.
  ScopedAsyncSignalsBlocked blocked;
  std::thread t([self = shared_from_this()] { self->Loop(); });
  helper = t.get_id();
  t.detach();
}

bool GilRunner::State::MayQueue(absl::Duration timeout, std::string* why) {
  if (stopping || ShuttingDown()) {
    *why = "not available: " + options.shutting_down_text;
    return false;
  }
  // Counted from the queueing: a caller that gave up after `timeout` has
  // made the next one with the same deadline refuse, however late the
  // helper took its job up.
  if (current == nullptr || absl::Now() - current->queued_at <= timeout) return true;
  // Queueing behind a job that is itself stuck could only time out. But the
  // GIL may have just come free and the helper not yet have taken it (a
  // hand-over takes up to the switch interval, longer on a busy machine):
  // give it a moment to move on before refusing.
  const Job* stuck = current.get();
  auto moved_on = [this, stuck]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return current.get() != stuck || stopping;
  };
  if (!mu.AwaitWithTimeout(absl::Condition(&moved_on),
                           std::min(timeout, absl::Milliseconds(250)))) {
    *why = absl::StrFormat(
        "not available: %s has waited %.1f s for the GIL (%s holds it, perhaps in a long C "
        "call); %s",
        options.who, absl::ToDoubleSeconds(absl::Now() - stuck->queued_at), options.holder,
        Context());
    return false;
  }
  if (stopping) {
    *why = "not available: " + options.shutting_down_text;
    return false;
  }
  return true;
}

bool GilRunner::RunWithin(const std::function<void()>& fn, absl::Duration timeout,
                          std::string* why) {
  auto job = std::make_shared<Job>();
  job->fn = fn;
  {
    absl::MutexLock l(&state_->mu);
    if (!state_->MayQueue(timeout, why)) return false;
    state_->StartLocked();
    state_->queue.push_back(job);
  }
  absl::MutexLock l(&job->mu);
  auto started = [&job]() ABSL_SHARED_LOCKS_REQUIRED(job->mu) {
    return job->state != Job::kPending;
  };
  if (!job->mu.AwaitWithTimeout(absl::Condition(&started), timeout)) {
    job->state = Job::kAbandoned;  // the helper skips it; `fn`'s captures die here
    *why = absl::StrFormat(
        "not available: the GIL was not free within %d ms (%s holds it, perhaps in a long C "
        "call); %s",
        absl::ToInt64Milliseconds(timeout), state_->options.holder, state_->Context());
    return false;
  }
  // Running or done: `fn` touches the caller's data, so wait for its end.
  auto done = [&job]() ABSL_SHARED_LOCKS_REQUIRED(job->mu) {
    return job->state == Job::kDone || job->state == Job::kAbandoned;
  };
  job->mu.Await(absl::Condition(&done));
  if (job->state == Job::kAbandoned) {
    *why = "not available: " + state_->options.shutting_down_text;
    return false;
  }
  return true;
}

bool GilRunner::Post(std::function<void()> fn) {
  auto job = std::make_shared<Job>();
  job->fn = std::move(fn);
  absl::MutexLock l(&state_->mu);
  if (state_->stopping) return false;
  state_->StartLocked();
  state_->queue.push_back(std::move(job));
  return true;
}

void GilRunner::State::RunOne(Job* job) {
  const bool ran = options.with_gil([job] {
    {
      absl::MutexLock jl(&job->mu);
      if (job->state != Job::kPending) return;  // abandoned: its caller has gone
      job->state = Job::kRunning;
    }
    job->fn();
    absl::MutexLock jl(&job->mu);
    job->state = Job::kDone;
  });
  if (!ran) {
    absl::MutexLock jl(&job->mu);
    if (job->state == Job::kPending) job->state = Job::kAbandoned;
  }
}

void GilRunner::State::Loop() {
  if (!options.thread_name.empty()) {
    pthread_setname_np(pthread_self(), options.thread_name.substr(0, 15).c_str());
  }
  if (options.on_thread_start) options.on_thread_start();
  for (;;) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock l(&mu);
      mu.Await(absl::Condition(
          +[](State* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
            return s->stopping || !s->queue.empty();
          },
          this));
      if (stopping) break;
      job = queue.front();
      queue.pop_front();
      current = job;
    }
    RunOne(job.get());
    absl::MutexLock l(&mu);
    current.reset();
  }
  {
    absl::MutexLock l(&mu);
    for (auto& job : queue) {
      absl::MutexLock jl(&job->mu);
      if (job->state == Job::kPending) job->state = Job::kAbandoned;
    }
    queue.clear();
  }
  if (options.on_thread_exit) options.on_thread_exit();
  absl::MutexLock l(&mu);
  exited = true;
}

void GilRunner::Stop(absl::Duration wait) {
  absl::MutexLock l(&state_->mu);
  state_->stopping = true;
  // A job that stops its own runner cannot wait for itself to end.
  if (!state_->started || std::this_thread::get_id() == state_->helper) return;
  state_->mu.AwaitWithTimeout(absl::Condition(&state_->exited), wait);
}

void GilRunner::AfterForkInChild() {
  // The parent's helper thread does not exist here and its mutexes may have
  // been held at the fork: leak that state rather than touch it.
  auto options = state_->options;
  new std::shared_ptr<State>(std::move(state_));
  state_ = std::make_shared<State>(std::move(options));
}

}  // namespace rsslab
