// Python work from native threads (the Control service's, /metrics) with a
// bound on the wait for the GIL, as rsslab_server's snapshots have: a
// handler holding the GIL in a long C call must not stall a snapshot whose
// other sections need no Python. One helper thread takes the GIL for each
// job; a job not started within its deadline is abandoned (never run), and
// while the helper still waits for the GIL later calls answer at once.
//
// Example (GIL not held):
//   std::string why;
//   if (!Gil().RunWithin([&] { ...Python C API... }, absl::Seconds(2), &why)) {
//     snapshot.mutable_python()->set_unavailable(why);
//   }

#ifndef RSSLAB_PYTHON_NATIVE_GIL_RUNNER_H_
#define RSSLAB_PYTHON_NATIVE_GIL_RUNNER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rsslab {
namespace py {

class GilRunner {
 public:
  GilRunner() = default;
  GilRunner(const GilRunner&) = delete;
  GilRunner& operator=(const GilRunner&) = delete;

  // Runs `fn` holding the GIL, on the helper thread, if the GIL is had
  // within `timeout`; then waits for `fn` to finish. False with `why` set
  // (and `fn` never run) past the deadline or once stopping.
  bool RunWithin(const std::function<void()>& fn, absl::Duration timeout, std::string* why);
  // GIL not held. Ends the helper (waits at most about a second for it).
  void Stop();

 private:
  struct Job {
    enum State { kPending, kRunning, kDone, kAbandoned };
    absl::Mutex mu;
    State state ABSL_GUARDED_BY(mu) = kPending;
    std::function<void()> fn;
    absl::Time queued;
  };
  void Loop();

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  // The job the helper is taking the GIL for, while it does.
  std::shared_ptr<Job> current_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
};

// The package's one runner.
GilRunner& Gil();

}  // namespace py
}  // namespace rsslab

#endif  // RSSLAB_PYTHON_NATIVE_GIL_RUNNER_H_
