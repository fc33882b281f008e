#include "loadgen/results/fill_check.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
constexpr int64_t kMiB = 1 << 20;

rsslab::v1::CacheStats Cache(int64_t bytes, int64_t evicted_bytes, uint64_t evictions,
                             int64_t limit = 100 * kMiB) {
  rsslab::v1::CacheStats c;
  c.set_cache_bytes(bytes);
  c.set_evicted_bytes(evicted_bytes);
  c.set_evictions(evictions);
  c.set_cache_limit_bytes(limit);
  return c;
}

rsslab::v1::Event SnapshotEvent(const std::string& phase, const rsslab::v1::CacheStats& c) {
  rsslab::v1::Event e;
  e.set_loadgen_phase(phase);
  *e.mutable_snapshot()->mutable_cache() = c;
  return e;
}

rsslab::v1::Event PhaseEvent(const std::string& phase, const rsslab::v1::CacheStats& c) {
  rsslab::v1::Event e;
  e.set_loadgen_phase(phase);
  *e.mutable_phase()->mutable_snapshot()->mutable_cache() = c;
  return e;
}

TEST(CheckFill, FilledAndChurnedTwice) {
  auto c = CheckFill(Cache(100 * kMiB - 5000, 250 * kMiB, 20000));
  EXPECT_TRUE(c.filled());
  EXPECT_TRUE(c.churned_twice());
  EXPECT_NEAR(c.churn(), 3.5, 0.01);
  EXPECT_EQ(c.stored_bytes(), 350 * kMiB - 5000);
  EXPECT_THAT(c.verdict(), StartsWith("cache filled ("));
  EXPECT_THAT(c.verdict(), HasSubstr("3.50x the 100.0 MiB limit, 20000 evictions"));
}

TEST(CheckFill, FilledOnceIsNotTwice) {
  auto c = CheckFill(Cache(99 * kMiB, 30 * kMiB, 2000));
  EXPECT_TRUE(c.filled());
  EXPECT_FALSE(c.churned_twice());
}

// Scale 0.2: ~72 MiB stored, nothing evicted.
TEST(CheckFill, NeverFilledIsFlagged) {
  auto c = CheckFill(Cache(72 * kMiB, 0, 0));
  EXPECT_FALSE(c.filled());
  EXPECT_FALSE(c.churned_twice());
  EXPECT_THAT(c.verdict(), StartsWith(kCacheNeverFilled));
  EXPECT_THAT(c.verdict(), HasSubstr("fill stored 72.0 MiB = 0.72x the 100.0 MiB limit, 0 evictions"));
}

TEST(CheckFill, NoLimitIsNotFilled) {
  EXPECT_FALSE(CheckFill(Cache(10 * kMiB, 0, 0, /*limit=*/0)).filled());
  EXPECT_FALSE(CheckFill(rsslab::v1::CacheStats()).filled());
}

TEST(FillWatch, ConcludesOnceWhenTheFillEnds) {
  FillWatch w;
  EXPECT_FALSE(w.Add(PhaseEvent("fill", Cache(0, 0, 0))));  // right after set_phase fill
  rsslab::v1::Event load;
  load.set_loadgen_phase("fill");
  load.mutable_load();
  EXPECT_FALSE(w.Add(load));
  EXPECT_FALSE(w.Add(SnapshotEvent("fill", Cache(100 * kMiB, 200 * kMiB, 9000))));
  // shrink evicts at once: its snapshot is not the fill's.
  auto c = w.Add(PhaseEvent("shrink", Cache(10 * kMiB, 290 * kMiB, 30000)));
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->filled());
  EXPECT_EQ(c->stored_bytes(), 300 * kMiB);
  EXPECT_FALSE(w.Add(SnapshotEvent("idle", Cache(10 * kMiB, 0, 0))));
  // A soak's later fills start from a warm cache: the first one counts.
  EXPECT_FALSE(w.Add(SnapshotEvent("fill", Cache(0, 0, 0))));
  EXPECT_FALSE(w.Add(SnapshotEvent("shrink", Cache(0, 0, 0))));
  EXPECT_FALSE(w.Finish());
}

TEST(FillWatch, UsesTheSnapshotBeforeATrimPhase) {
  FillWatch w;
  EXPECT_FALSE(w.Add(PhaseEvent("fill", Cache(0, 0, 0))));
  rsslab::v1::Event trim = PhaseEvent("trim", Cache(0, 0, 0));
  *trim.mutable_phase()->mutable_before()->mutable_cache() = Cache(50 * kMiB, 0, 0);
  auto c = w.Add(trim);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->filled());
  EXPECT_EQ(c->stored_bytes(), 50 * kMiB);
}

TEST(FillWatch, FinishWhenTheRunEndsInFill) {
  FillWatch w;
  EXPECT_FALSE(w.Finish());  // no fill at all: nothing to say
  EXPECT_FALSE(w.Add(SnapshotEvent("fill", Cache(40 * kMiB, 0, 0))));
  auto c = w.Finish();
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->filled());
  EXPECT_FALSE(w.Finish());
}

// A service with no cache (the package without cache_stats, or a process
// read from /proc): its fill snapshots carry no limit, so the check is off
// rather than "never filled".
TEST(FillWatch, NoCacheLimitInAnyFillSnapshotTurnsTheCheckOff) {
  FillWatch w;
  EXPECT_FALSE(w.Add(PhaseEvent("fill", rsslab::v1::CacheStats())));
  EXPECT_FALSE(w.Add(SnapshotEvent("fill", Cache(0, 0, 0, /*limit=*/0))));
  EXPECT_FALSE(w.off());
  EXPECT_FALSE(w.Add(PhaseEvent("shrink", rsslab::v1::CacheStats())));
  EXPECT_TRUE(w.off());
  EXPECT_FALSE(w.Finish());
  FillWatch ends_in_fill;
  EXPECT_FALSE(ends_in_fill.Add(SnapshotEvent("fill", rsslab::v1::CacheStats())));
  EXPECT_FALSE(ends_in_fill.Finish());
  EXPECT_TRUE(ends_in_fill.off());
  // A limit seen in the fill: checked, even if the last snapshot lost it.
  FillWatch limited;
  EXPECT_FALSE(limited.Add(SnapshotEvent("fill", Cache(1 * kMiB, 0, 0))));
  EXPECT_FALSE(limited.Add(SnapshotEvent("fill", rsslab::v1::CacheStats())));
  EXPECT_TRUE(limited.Finish());
  EXPECT_FALSE(limited.off());
}

TEST(FillWatch, RunsWithoutPhasesSayNothing) {
  FillWatch w;
  rsslab::v1::Event load;
  load.mutable_load();
  EXPECT_FALSE(w.Add(load));
  EXPECT_FALSE(w.Add(SnapshotEvent("", Cache(1, 0, 0))));
  EXPECT_FALSE(w.Finish());
}

}  // namespace
}  // namespace rsslab
