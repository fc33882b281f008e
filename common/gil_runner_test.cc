#include "common/gil_runner.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

// A plain mutex stands in for the GIL: the runner only knows `with_gil`.
struct FakeGil {
  absl::Mutex mu;
  GilRunnerOptions Options() {
    GilRunnerOptions o;
    o.with_gil = [this](const std::function<void()>& fn) {
      absl::MutexLock l(&mu);
      fn();
      return true;
    };
    o.who = "the test's Python thread";
    o.holder = "the test";
    return o;
  }
};

TEST(GilRunner, RunsTimedAndPostedJobsInOrderOnItsNamedThread) {
  FakeGil gil;
  GilRunnerOptions o = gil.Options();
  o.thread_name = "rsslab-py0";
  std::string started_on;
  o.on_thread_start = [&started_on] {
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof(name));
    started_on = name;
  };
  GilRunner runner(std::move(o));
  std::vector<int> order;  // written by the helper only, read after a job
  ASSERT_TRUE(runner.Post([&order] { order.push_back(1); }));
  ASSERT_TRUE(runner.Post([&order] { order.push_back(2); }));
  std::string why;
  ASSERT_TRUE(runner.RunWithin([&order] { order.push_back(3); }, absl::Seconds(5), &why)) << why;
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(started_on, "rsslab-py0");
}

TEST(GilRunner, AbandonsAJobNotStartedWithinItsDeadlineAndNeverRunsIt) {
  FakeGil gil;
  GilRunner runner(gil.Options());
  std::atomic<bool> ran{false};
  std::string why;
  gil.mu.Lock();
  const absl::Time t0 = absl::Now();
  EXPECT_FALSE(runner.RunWithin([&ran] { ran = true; }, absl::Milliseconds(100), &why));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  gil.mu.Unlock();
  EXPECT_TRUE(absl::StrContains(why, "the GIL was not free within 100 ms (the test holds it"))
      << why;
  // The GIL is free again: later jobs run, the abandoned one never does.
  ASSERT_TRUE(runner.RunWithin([] {}, absl::Seconds(5), &why)) << why;
  EXPECT_FALSE(ran);
}

TEST(GilRunner, RefusesAtOnceBehindAJobStuckPastTheDeadline) {
  FakeGil gil;
  GilRunnerOptions o = gil.Options();
  o.context = [] { return std::string("busy workers: w0"); };
  GilRunner runner(std::move(o));
  std::string why;
  gil.mu.Lock();
  EXPECT_FALSE(runner.RunWithin([] {}, absl::Milliseconds(100), &why));
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time t0 = absl::Now();
  EXPECT_FALSE(runner.RunWithin([] {}, absl::Milliseconds(100), &why));
  // The 250 ms grace for a hand-over, at most the deadline: not a queue wait.
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
  EXPECT_TRUE(absl::StrContains(why, "the test's Python thread has waited")) << why;
  EXPECT_TRUE(absl::StrContains(why, "; busy workers: w0")) << why;
  gil.mu.Unlock();
  ASSERT_TRUE(runner.RunWithin([] {}, absl::Seconds(5), &why)) << why;
}

// The snapshot that gave up after its 1.5 s made the next one wait 1.5 s
// again when the helper had taken its job up a little late (a loaded CI
// machine): the wait behind a stuck job counts from its queueing.
TEST(GilRunner, AHelperLateToTakeTheStuckJobUpDoesNotMakeTheNextCallerWait) {
  FakeGil gil;
  GilRunnerOptions o = gil.Options();
  o.on_thread_start = [] { absl::SleepFor(absl::Milliseconds(150)); };
  GilRunner runner(std::move(o));
  std::string why;
  gil.mu.Lock();
  EXPECT_FALSE(runner.RunWithin([] {}, absl::Milliseconds(400), &why));
  const absl::Time t0 = absl::Now();
  EXPECT_FALSE(runner.RunWithin([] {}, absl::Milliseconds(400), &why));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));  // the 250 ms hand-over grace
  EXPECT_TRUE(absl::StrContains(why, "the test's Python thread has waited")) << why;
  gil.mu.Unlock();
  ASSERT_TRUE(runner.RunWithin([] {}, absl::Seconds(5), &why)) << why;
}

TEST(GilRunner, StopIsBoundedIdempotentAndAbandonsWhatIsQueued) {
  FakeGil gil;
  GilRunnerOptions o = gil.Options();
  absl::Notification exited;
  o.on_thread_exit = [&exited] { exited.Notify(); };
  GilRunner runner(std::move(o));
  std::atomic<int> ran{0};
  gil.mu.Lock();
  ASSERT_TRUE(runner.Post([&ran] { ++ran; }));  // the helper waits for the GIL in it
  ASSERT_TRUE(runner.Post([&ran] { ++ran; }));  // queued behind: abandoned
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time t0 = absl::Now();
  runner.Stop(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  runner.Stop(absl::Milliseconds(10));
  EXPECT_FALSE(runner.Post([&ran] { ++ran; }));
  std::string why;
  EXPECT_FALSE(runner.RunWithin([&ran] { ++ran; }, absl::Seconds(1), &why));
  EXPECT_EQ(why, "not available: the Python interpreter is shutting down");
  gil.mu.Unlock();
  ASSERT_TRUE(exited.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(ran, 1);  // the job it was in, never the queued one
}

TEST(GilRunner, RefusesWhileTheOwnerShutsDownOrTheInterpreterIsGone) {
  std::atomic<bool> down{false};
  GilRunnerOptions o;
  o.with_gil = [](const std::function<void()>&) { return false; };  // cannot enter
  o.shutting_down = [&down] { return down.load(); };
  o.shutting_down_text = "the server is shutting down";
  GilRunner runner(std::move(o));
  bool ran = false;
  std::string why;
  EXPECT_FALSE(runner.RunWithin([&ran] { ran = true; }, absl::Seconds(5), &why));
  EXPECT_EQ(why, "not available: the server is shutting down");
  down = true;
  why.clear();
  EXPECT_FALSE(runner.RunWithin([&ran] { ran = true; }, absl::Seconds(5), &why));
  EXPECT_EQ(why, "not available: the server is shutting down");
  EXPECT_FALSE(ran);
}

TEST(GilRunner, AJobMayStopItsOwnRunner) {
  FakeGil gil;
  GilRunner runner(gil.Options());
  std::string why;
  ASSERT_TRUE(runner.RunWithin([&runner] { runner.Stop(absl::InfiniteDuration()); },
                               absl::Seconds(5), &why))
      << why;
  EXPECT_FALSE(runner.Post([] {}));
}

TEST(GilRunner, AForkedChildGetsAFreshRunner) {
  FakeGil gil;
  GilRunner runner(gil.Options());
  std::string why;
  ASSERT_TRUE(runner.RunWithin([] {}, absl::Seconds(5), &why)) << why;  // helper running
  // As os.fork() does, fork holding the GIL (the helper may still be
  // inside it after its job's end), which each side then gives up.
  gil.mu.Lock();
  const pid_t pid = fork();
  gil.mu.Unlock();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Without a fresh state the child's jobs would queue for a helper
    // thread that was not forked, and time out.
    runner.AfterForkInChild();
    bool ran = false;
    std::string child_why;
    const bool ok = runner.RunWithin([&ran] { ran = true; }, absl::Seconds(5), &child_why);
    _exit(ok && ran ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_TRUE(runner.RunWithin([] {}, absl::Seconds(5), &why)) << why;
}

}  // namespace
}  // namespace rsslab
