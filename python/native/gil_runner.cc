#include "python/native/gil_runner.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "python/native/tracked_threads.h"

namespace rsslab {
namespace py {

GilRunner& Gil() {
  static GilRunner* r = new GilRunner();  // never destroyed (see State())
  return *r;
}

bool GilRunner::RunWithin(const std::function<void()>& fn, absl::Duration timeout,
                          std::string* why) {
  auto job = std::make_shared<Job>();
  job->fn = fn;
  job->queued = absl::Now();
  {
    absl::MutexLock l(&mu_);
    if (stopping_ || ShuttingDown()) {
      *why = "not available: the Python interpreter is shutting down";
      return false;
    }
    if (current_ != nullptr && absl::Now() - current_->queued > timeout) {
      // Queueing behind a job that is itself stuck could only time out. But
      // the GIL may have just come free and the helper not yet have taken it
      // (a hand-over takes up to the switch interval, longer on a busy
      // machine): give it a moment to move on before refusing.
      const Job* stuck = current_.get();
      auto moved_on = [this, stuck]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return current_.get() != stuck;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&moved_on),
                                std::min(timeout, absl::Milliseconds(250)))) {
        *why = absl::StrFormat(
            "not available: the package's Python thread has waited %.1f s for the GIL (a "
            "thread holds it, perhaps in a long C call); the sections that need no Python are "
            "filled",
            absl::ToDoubleSeconds(absl::Now() - current_->queued));
        return false;
      }
      if (stopping_) {
        *why = "not available: the Python interpreter is shutting down";
        return false;
      }
    }
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();  // Stop() waits for its end
    }
    queue_.push_back(job);
  }
  absl::MutexLock l(&job->mu);
  auto started = [&job]() ABSL_SHARED_LOCKS_REQUIRED(job->mu) {
    return job->state != Job::kPending;
  };
  if (!job->mu.AwaitWithTimeout(absl::Condition(&started), timeout)) {
    job->state = Job::kAbandoned;  // the helper skips it; `fn`'s captures die here
    *why = absl::StrFormat(
        "not available: the GIL was not free within %d ms (a thread holds it, perhaps in a "
        "long C call); the sections that need no Python are filled",
        absl::ToInt64Milliseconds(timeout));
    return false;
  }
  auto done = [&job]() ABSL_SHARED_LOCKS_REQUIRED(job->mu) {
    return job->state == Job::kDone || job->state == Job::kAbandoned;
  };
  job->mu.Await(absl::Condition(&done));
  if (job->state == Job::kAbandoned) {
    *why = "not available: the Python interpreter is shutting down";
    return false;
  }
  return true;
}

void GilRunner::Loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock l(&mu_);
      mu_.Await(absl::Condition(
          +[](GilRunner* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
            return r->stopping_ || !r->queue_.empty();
          },
          this));
      if (stopping_) break;
      job = queue_.front();
      queue_.pop_front();
      current_ = job;
    }
    const bool ran = WithGil([&] {
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
    absl::MutexLock l(&mu_);
    current_.reset();
  }
  absl::MutexLock l(&mu_);
  for (auto& job : queue_) {
    absl::MutexLock jl(&job->mu);
    if (job->state == Job::kPending) job->state = Job::kAbandoned;
  }
  queue_.clear();
  exited_ = true;
}

void GilRunner::Stop() {
  absl::MutexLock l(&mu_);
  stopping_ = true;
  if (!started_) return;
  // Bounded: a helper inside PyGILState_Ensure returns once the caller's
  // GIL is released, which it is here; a second is plenty.
  mu_.AwaitWithTimeout(absl::Condition(&exited_), absl::Seconds(1));
}

}  // namespace py
}  // namespace rsslab
