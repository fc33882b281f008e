// Python work from native threads with a bound on the wait for the GIL:
// rsslab_server's Control calls and the Python package's Control and
// /metrics share it. A handler holding the GIL in a long C call must not
// stall a snapshot whose other sections need no Python. One helper thread
// takes the GIL for each job, in order; a job not started within its
// deadline is abandoned (never run), and while the helper still waits for
// the GIL (or runs a job) past a caller's deadline, later calls answer at
// once instead of queueing behind it.
//
// The runner knows nothing of CPython: its owner says how the GIL is taken
// (`with_gil`), so the server's attached thread state and the package's
// PyGILState calls both fit.
//
// Example (GIL not held):
//   GilRunnerOptions o;
//   o.with_gil = [](const std::function<void()>& fn) { PyScope s; fn(); return true; };
//   GilRunner gil(std::move(o));
//   std::string why;
//   if (!gil.RunWithin([&] { ...Python C API... }, absl::Seconds(2), &why)) {
//     snapshot.mutable_python()->set_unavailable(why);
//   }
//   gil.Post([refs] { ...drop references... });  // untimed, in order
//   gil.Stop(absl::InfiniteDuration());

#ifndef RSSLAB_COMMON_GIL_RUNNER_H_
#define RSSLAB_COMMON_GIL_RUNNER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"

namespace rsslab {

struct GilRunnerOptions {
  // Runs its argument holding the GIL and returns true, or returns false
  // without running it when the interpreter can no longer be entered.
  // Required.
  std::function<bool(const std::function<void()>&)> with_gil;
  // True while the owner is shutting down: calls are refused at once with
  // `shutting_down_text`. Default: never.
  std::function<bool()> shutting_down;
  std::string shutting_down_text = "the Python interpreter is shutting down";
  // The helper thread's name ("" leaves it unnamed) and hooks run on it
  // first and last (the server attaches and detaches a thread state).
  std::string thread_name;
  std::function<void()> on_thread_start;
  std::function<void()> on_thread_exit;
  // Words of the refusals: "not available: <who> has waited 3.1 s for the
  // GIL (<holder> holds it, perhaps in a long C call); <context()>".
  std::string who = "the Python thread";
  std::string holder = "a thread";
  // Evaluated when a call is refused. Default: the sentence below.
  std::function<std::string()> context;
};

class GilRunner {
 public:
  explicit GilRunner(GilRunnerOptions options);
  // Stops (waiting without limit) if Stop() was not called.
  ~GilRunner();
  GilRunner(const GilRunner&) = delete;
  GilRunner& operator=(const GilRunner&) = delete;

  // Starts the helper thread now (else the first job starts it).
  void Start();
  // Runs `fn` holding the GIL, on the helper thread, if the GIL is had
  // within `timeout`; then waits for `fn` to finish. False with `why` set
  // (and `fn` never run) past the deadline, behind a job stuck past it, or
  // once stopping. GIL not held by the caller.
  bool RunWithin(const std::function<void()>& fn, absl::Duration timeout, std::string* why);
  // Queues `fn` to run holding the GIL with no deadline, in order with the
  // timed jobs. False (not queued) once stopping.
  bool Post(std::function<void()> fn);
  // GIL not held. Ends the helper after the job it is in: waits at most
  // `wait` for that. Jobs still queued are abandoned. Idempotent.
  // Called from a job, returns at once.
  void Stop(absl::Duration wait);
  // In a forked child (a pthread_atfork child handler): the parent's helper
  // thread is gone; a fresh runner, not started, with the same options.
  void AfterForkInChild();

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the helper thread
};

}  // namespace rsslab

#endif  // RSSLAB_COMMON_GIL_RUNNER_H_
