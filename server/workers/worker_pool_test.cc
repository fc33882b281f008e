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

int CountWithPrefix(const std::multiset<std::string>& names, const std::string& prefix) {
  int n = 0;
  for (const std::string& name : names) n += name.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// Runs `n` tasks one after another (each waits for the previous), so with
// churn_every=1 every task runs on a fresh thread.
void RunSerially(WorkerPool& pool, int n, std::set<int>* tids) {
  for (int i = 0; i < n; ++i) {
    absl::Notification ran;
    pool.Submit([&](int) {
      tids->insert(Tid());
      ran.Notify();
    });
    ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(30)));
  }
}

TEST(WorkerPoolTest, ChurnOverlapKeepsReplacedThreadsAliveWhileSuccessorsServe) {
  WorkerPoolOptions o;
  o.threads = 2;
  o.name_prefix = "ovl-w";
  o.churn_every = 1;
  // Far longer than the test: only Stop() can end the linger, so a Stop()
  // that failed to wake lingering threads would hang the test.
  o.churn_overlap = absl::Hours(1);
  std::atomic<int> starts{0}, exits{0};
  o.on_thread_start = [&](int) { starts.fetch_add(1); };
  o.on_thread_exit = [&](int) { exits.fetch_add(1); };
  WorkerPool pool(o);
  pool.Start();
  std::set<int> tids;
  RunSerially(pool, 10, &tids);
  EXPECT_EQ(tids.size(), 10u);
  // Each task's thread was replaced after it and lingers: 10 replaced
  // threads plus the 2 current ones are alive at once.
  absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (pool.Stats().lingering < 10 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(pool.Stats().lingering, 10);
  EXPECT_EQ(CountWithPrefix(ThreadNames(), "ovl-w"), 12);
  EXPECT_EQ(exits.load(), 0);
  pool.Stop();
  EXPECT_EQ(pool.Stats().lingering, 0);
  EXPECT_EQ(starts.load(), exits.load());
  EXPECT_EQ(CountWithPrefix(ThreadNames(), "ovl-w"), 0);
}

TEST(WorkerPoolTest, MaxLingeringBoundsTheThreadsAChurnPilesUp) {
  WorkerPoolOptions o;
  o.threads = 2;
  o.name_prefix = "cap-w";
  o.churn_every = 1;
  o.churn_overlap = absl::Hours(1);
  o.max_lingering = 3;
  WorkerPool pool(o);
  pool.Start();
  std::set<int> tids;
  RunSerially(pool, 10, &tids);
  EXPECT_EQ(tids.size(), 10u);
  // Past the cap a replacement waits for its predecessor to exit instead.
  // Wait for the settled state both ways: an exiting thread stays listed
  // for a moment, and a new one carries its creator's name until it sets
  // its own (seen once: 4 of 5 counted).
  absl::Time give_up = absl::Now() + absl::Seconds(30);
  while ((CountWithPrefix(ThreadNames(), "cap-w") != 2 + 3 || pool.Stats().lingering != 3) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(pool.Stats().lingering, 3);
  EXPECT_EQ(CountWithPrefix(ThreadNames(), "cap-w"), 2 + 3);
  pool.Stop();
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
