// Trimmer on a real WorkerPool (glibc, no Python): a worker stuck past the
// timeout is reported and runs the release later without touching the
// finished trim's state; --trim_thread_stats fields are filled per worker.

#include "memory/trim/trimmer.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/workers/worker_pool.h"

namespace rsslab {
namespace {

TEST(TrimmerTest, StuckWorkerIsReportedAndItsLateReleaseIsHarmless) {
  WorkerPoolOptions o;
  o.threads = 3;
  WorkerPool pool(o);
  pool.Start();
  absl::Notification release, started;
  pool.Submit([&](int) {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();

  Trimmer trimmer(&pool, absl::Milliseconds(200), /*thread_stats=*/true);
  rsslab::v1::TrimResult r = trimmer.Run(rsslab::v1::TRIM_PER_THREAD, "manual");
  ASSERT_EQ(r.workers_size(), 3);
  int ran = 0;
  for (const auto& w : r.workers()) {
    if (w.ran()) {
      ++ran;
      EXPECT_TRUE(w.has_before()) << w.worker();
      EXPECT_EQ(w.before().heap_committed_bytes(), -1);  // glibc: no per-thread figure
      EXPECT_EQ(w.after().arena(), -1);
    } else {
      EXPECT_FALSE(w.error().empty());
      EXPECT_FALSE(w.has_before());
    }
  }
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(r.thread_call(), "none");
  EXPECT_EQ(r.after_threads_call(), "none");

  // The stuck worker gets free and runs the queued release after the trim
  // returned; the next trim reaches all three.
  release.Notify();
  rsslab::v1::TrimResult again = trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "manual");
  int ran_again = 0;
  for (const auto& w : again.workers()) ran_again += w.ran();
  EXPECT_EQ(ran_again, 3);
  EXPECT_EQ(again.call(), "malloc_trim(0)");
  EXPECT_EQ(trimmer.count(), 2u);
  std::map<std::string, Trimmer::TriggerTotals> totals = trimmer.totals();
  EXPECT_EQ(totals["manual"].count, 2u);
  EXPECT_EQ(totals.count("phase"), 0u);
  pool.Stop();
}

TEST(TrimmerTest, AfterReleaseRunsOnEachWorkerWithinThePass) {
  WorkerPoolOptions o;
  o.threads = 3;
  WorkerPool pool(o);
  pool.Start();
  Trimmer trimmer(&pool, absl::Seconds(10), /*thread_stats=*/true);
  absl::Mutex mu;
  std::set<int> tids;
  rsslab::v1::TrimResult r = trimmer.Run(rsslab::v1::TRIM_PER_THREAD, "manual",
                                         absl::InfiniteDuration(), [&] {
                                           absl::MutexLock l(&mu);
                                           tids.insert(static_cast<int>(syscall(SYS_gettid)));
                                         });
  ASSERT_EQ(r.workers_size(), 3);
  absl::MutexLock l(&mu);
  EXPECT_EQ(tids.size(), 3u);  // once on each worker, done when Run returns
  for (const auto& w : r.workers()) {
    EXPECT_TRUE(w.ran());
    EXPECT_EQ(tids.count(w.tid()), 1u) << w.tid();
  }
  pool.Stop();
}

TEST(TrimmerTest, TotalsByTrigger) {
  Trimmer trimmer(nullptr);
  trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "phase");
  trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "auto_interval");
  trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "auto_interval");
  std::map<std::string, Trimmer::TriggerTotals> totals = trimmer.totals();
  EXPECT_EQ(totals["phase"].count, 1u);
  EXPECT_EQ(totals["auto_interval"].count, 2u);
  EXPECT_EQ(trimmer.auto_count(), 2u);
  EXPECT_EQ(trimmer.recent().size(), 3u);
}

}  // namespace
}  // namespace rsslab
