#include "server/workers/worker_pool.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <set>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

int Tid() { return static_cast<int>(syscall(SYS_gettid)); }

std::multiset<std::string> ThreadNames() {
  std::multiset<std::string> names;
  DIR* dir = opendir("/proc/self/task");
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string comm;
    std::getline(f, comm);
    names.insert(comm);
  }
  closedir(dir);
  return names;
}

TEST(WorkerPoolTest, RunsEveryTaskAndDrainsOnStop) {
  WorkerPoolOptions o;
  o.threads = 3;
  WorkerPool pool(o);
  pool.Start();
  std::atomic<int> done{0};
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(pool.Submit([&](int) { done.fetch_add(1); }));
  }
  pool.Stop();
  EXPECT_EQ(done.load(), 1000);
  EXPECT_FALSE(pool.Submit([](int) {}));
}

TEST(WorkerPoolTest, ThreadsAreNamedAndCountedExactly) {
  WorkerPoolOptions o;
  o.threads = 5;
  o.name_prefix = "tpool-w";
  WorkerPool pool(o);
  pool.Start();
  // Wait until all threads have registered (readiness, not sleep).
  auto runs = pool.RunOnEachWorker([](int) {}, absl::Seconds(30));
  std::multiset<std::string> names = ThreadNames();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(names.count("tpool-w" + std::to_string(i)), 1u) << i;
  }
  EXPECT_EQ(names.count("tpool-w5"), 0u);
  EXPECT_EQ(pool.Stats().alive, 5);
}

TEST(WorkerPoolTest, RunOnEachWorkerReachesEveryThreadOnItsOwnThread) {
  WorkerPoolOptions o;
  o.threads = 8;
  std::atomic<int> started{0};
  o.on_thread_start = [&](int) { started.fetch_add(1); };
  WorkerPool pool(o);
  pool.Start();
  absl::Mutex mu;
  std::set<int> tids;
  auto runs = pool.RunOnEachWorker(
      [&](int) {
        absl::MutexLock l(&mu);
        tids.insert(Tid());
      },
      absl::Seconds(30));
  ASSERT_EQ(runs.size(), 8u);
  std::set<int> reported;
  for (const WorkerRun& r : runs) {
    EXPECT_TRUE(r.ran) << r.worker;
    reported.insert(r.tid);
  }
  EXPECT_EQ(tids.size(), 8u);
  EXPECT_EQ(tids, reported);
  EXPECT_EQ(tids.count(Tid()), 0u);  // never on the caller's thread
  EXPECT_EQ(started.load(), 8);
}

TEST(WorkerPoolTest, StuckWorkerIsReportedAndOthersStillRun) {
  WorkerPoolOptions o;
  o.threads = 3;
  WorkerPool pool(o);
  pool.Start();
  absl::Notification release, entered;
  pool.Submit([&](int) {
    entered.Notify();
    release.WaitForNotification();
  });
  entered.WaitForNotification();
  auto runs = pool.RunOnEachWorker([](int) {}, absl::Milliseconds(500));
  int ran = 0;
  for (const WorkerRun& r : runs) ran += r.ran;
  EXPECT_EQ(ran, 2);
  WorkerPoolStats st = pool.Stats();
  EXPECT_EQ(st.busy, 1);
  // Others keep serving while one is stuck.
  absl::Notification other;
  pool.Submit([&](int) { other.Notify(); });
  EXPECT_TRUE(other.WaitForNotificationWithTimeout(absl::Seconds(30)));
  release.Notify();
  pool.Stop();
}

TEST(WorkerPoolTest, ChurnReplacesThreads) {
  WorkerPoolOptions o;
  o.threads = 2;
  o.churn_every = 10;
  std::atomic<int> starts{0}, exits{0};
  o.on_thread_start = [&](int) { starts.fetch_add(1); };
  o.on_thread_exit = [&](int) { exits.fetch_add(1); };
  WorkerPool pool(o);
  pool.Start();
  absl::Mutex mu;
  std::set<int> tids;
  int done = 0;
  for (int i = 0; i < 200; ++i) {
    pool.Submit([&](int) {
      absl::MutexLock l(&mu);
      tids.insert(Tid());
      ++done;
    });
  }
  {
    // Churn only happens while running, so wait for the work before Stop().
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(+[](int* d) { return *d == 200; }, &done));
  }
  pool.Stop();
  // 200 tasks at 10 per thread: at least 20 distinct OS threads ran them.
  EXPECT_GE(tids.size(), 20u);
  EXPECT_GE(pool.Stats().threads_started, 20u);
  EXPECT_EQ(starts.load(), exits.load());
}

TEST(WorkerPoolTest, FixedModeNeverReplaces) {
  WorkerPoolOptions o;
  o.threads = 2;
  WorkerPool pool(o);
  pool.Start();
  for (int i = 0; i < 100; ++i) pool.Submit([](int) {});
  pool.Stop();
  EXPECT_EQ(pool.Stats().threads_started, 2u);
}

}  // namespace
}  // namespace rsslab
