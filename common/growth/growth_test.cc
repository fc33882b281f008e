#include "common/growth/growth.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace {

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kHour = 3600LL * 1000000000LL;

TEST(ComputeGrowthTest, FlagsRssOverThresholdAndThreadGrowth) {
  std::vector<GrowthPoint> p = {{0, 100 * kMiB, 10, 2},
                                {kHour, 104 * kMiB, 10, 2},   // +4 MiB: under 8
                                {2 * kHour, 120 * kMiB, 10, 3},  // +16 MiB: flagged
                                {3 * kHour, 120 * kMiB, 42, 3}};  // threads +32
  std::vector<GrowthStep> s = ComputeGrowth(8, p, "post-idle rss");
  ASSERT_EQ(s.size(), 4u);
  EXPECT_FALSE(s[0].has_prev);
  EXPECT_FALSE(s[1].flagged);
  EXPECT_TRUE(s[2].flagged);
  EXPECT_EQ(s[2].flag_reason, "post-idle rss +16.0 MiB > 8.0 MiB");
  EXPECT_EQ(s[2].arena_change, 1);
  EXPECT_TRUE(s[3].flagged);
  EXPECT_EQ(s[3].flag_reason, "threads +32");
  EXPECT_EQ(s[3].growth_first, 20 * kMiB);
}

TEST(ComputeGrowthTest, SkipsPointsWithoutFigure) {
  std::vector<GrowthPoint> p = {{0, 100 * kMiB, 10, 2}, {1, -1, -1, -1}, {2, 130 * kMiB, 10, 2}};
  std::vector<GrowthStep> s = ComputeGrowth(8, p);
  EXPECT_FALSE(s[1].has_prev);
  EXPECT_TRUE(s[2].has_prev);
  EXPECT_EQ(s[2].growth_prev, 30 * kMiB);
}

TEST(GrowthPerHourTest, LeastSquaresSlope) {
  // 10 MiB, 2 threads and 1 arena an hour, over half-hour samples.
  std::vector<GrowthPoint> p;
  for (int i = 0; i < 5; ++i) {
    p.push_back({i * kHour / 2, 100 * kMiB + i * 5 * kMiB, 10 + i, 2 + i / 2});
  }
  GrowthRate g = GrowthPerHour(p);
  EXPECT_EQ(g.points, 5);
  EXPECT_DOUBLE_EQ(g.hours, 2.0);
  EXPECT_NEAR(g.rss_bytes_per_hour, 10.0 * kMiB, 1);
  EXPECT_NEAR(g.threads_per_hour, 2.0, 1e-9);
  EXPECT_NEAR(g.arenas_per_hour, 1.0, 1e-9);  // 2,2,3,3,4
}

TEST(GrowthPerHourTest, OnePointIsNoSlope) {
  GrowthRate g = GrowthPerHour({{5, 100, 1, 1}});
  EXPECT_EQ(g.points, 1);
  EXPECT_EQ(g.rss_bytes_per_hour, 0);
}

}  // namespace
}  // namespace rsslab
