// The U test against values known from tables and scipy's documentation,
// and its exact distribution against a brute-force enumeration of every
// split (with ties) computed here.
#include "loadgen/results/mann_whitney.h"

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace rsslab {
namespace {

// U of `a` from its definition: pairs a > b count 1, ties 1/2.
double UOf(const std::vector<double>& a, const std::vector<double>& b) {
  double u = 0;
  for (double x : a) {
    for (double y : b) u += x > y ? 1 : (x == y ? 0.5 : 0);
  }
  return u;
}

// Two-sided exact p by trying every way of choosing which n of the pooled
// values form the first sample.
double BruteForceP(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> pooled = a;
  pooled.insert(pooled.end(), b.begin(), b.end());
  const int total = static_cast<int>(pooled.size());
  const int n = static_cast<int>(a.size());
  const double mean = n * static_cast<double>(b.size()) / 2;
  const double obs = std::fabs(UOf(a, b) - mean);
  long extreme = 0, all = 0;
  for (unsigned mask = 0; mask < (1u << total); ++mask) {
    if (__builtin_popcount(mask) != n) continue;
    std::vector<double> x, y;
    for (int i = 0; i < total; ++i) ((mask >> i) & 1 ? x : y).push_back(pooled[i]);
    ++all;
    if (std::fabs(UOf(x, y) - mean) >= obs - 1e-9) ++extreme;
  }
  return static_cast<double>(extreme) / all;
}

TEST(MannWhitneyTest, CompleteSeparationGivesTheSmallestP) {
  // 2 / C(6,3) = 0.1: three repeats a side can never reach 0.05.
  MannWhitney r = MannWhitneyU({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(r.exact);
  EXPECT_DOUBLE_EQ(r.u, 0);
  EXPECT_NEAR(r.p, 0.1, 1e-12);
  EXPECT_NEAR(r.min_p, 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(MannWhitneyU({4, 5, 6}, {1, 2, 3}).u, 9);
  EXPECT_NEAR(MannWhitneyU({4, 5, 6}, {1, 2, 3}).p, 0.1, 1e-12);
  // 2 / C(8,4) = 2/70 = 0.0286: four a side can.
  EXPECT_NEAR(MannWhitneyU({10, 11, 12, 13}, {1, 2, 3, 4}).p, 2.0 / 70, 1e-12);
  // 2 / C(10,5) = 2/252.
  EXPECT_NEAR(MannWhitneyU({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}).p, 2.0 / 252, 1e-12);
}

TEST(MannWhitneyTest, MinPBySampleSizes) {
  EXPECT_NEAR(MannWhitneyMinP(3, 3), 0.1, 1e-12);
  EXPECT_NEAR(MannWhitneyMinP(3, 4), 2.0 / 35, 1e-12);   // 0.057
  EXPECT_NEAR(MannWhitneyMinP(3, 5), 2.0 / 56, 1e-12);   // 0.036
  EXPECT_NEAR(MannWhitneyMinP(4, 4), 2.0 / 70, 1e-12);   // 0.029
  EXPECT_NEAR(MannWhitneyMinP(5, 5), 2.0 / 252, 1e-12);  // 0.008
  EXPECT_DOUBLE_EQ(MannWhitneyMinP(1, 1), 1);
  EXPECT_NEAR(MannWhitneyMinP(2, 2), 1.0 / 3, 1e-12);
  EXPECT_DOUBLE_EQ(MannWhitneyMinP(0, 5), 1);
}

TEST(MannWhitneyTest, FiveAgainstFiveMatchesTheCriticalValueTable) {
  // The textbook table's two-sided 0.05 critical value for n1 = n2 = 5 is
  // U = 2: P(U <= 2) = 4/252, so p = 8/252 = 0.032 < 0.05, while U = 3 gives
  // P(U <= 3) = 7/252 and p = 14/252 = 0.056 > 0.05.
  MannWhitney r2 = MannWhitneyU({1, 2, 3, 4, 7}, {5, 6, 8, 9, 10});
  EXPECT_DOUBLE_EQ(r2.u, 2);
  EXPECT_NEAR(r2.p, 8.0 / 252, 1e-12);
  MannWhitney r3 = MannWhitneyU({1, 2, 3, 5, 7}, {4, 6, 8, 9, 10});
  EXPECT_DOUBLE_EQ(r3.u, 3);
  EXPECT_NEAR(r3.p, 14.0 / 252, 1e-12);
}

TEST(MannWhitneyTest, ScipyDocumentationExample) {
  // scipy.stats.mannwhitneyu(males, females, method="exact") documents
  // statistic 17.0, pvalue 0.1111111111111111 for these ages.
  MannWhitney r = MannWhitneyU({19, 22, 16, 29, 24}, {20, 11, 17, 12});
  EXPECT_DOUBLE_EQ(r.u, 17);
  EXPECT_NEAR(r.p, 1.0 / 9, 1e-12);
}

TEST(MannWhitneyTest, ExactDistributionWithTiesMatchesEnumeration) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + rng() % 6, m = 1 + rng() % 6;
    std::vector<double> a, b;
    // Few distinct values: many ties, as thread and arena counts have.
    for (int i = 0; i < n; ++i) a.push_back(rng() % 5);
    for (int i = 0; i < m; ++i) b.push_back(rng() % 5 + (trial % 3 == 0 ? 2 : 0));
    MannWhitney r = MannWhitneyU(a, b);
    ASSERT_TRUE(r.exact);
    EXPECT_DOUBLE_EQ(r.u, UOf(a, b));
    EXPECT_NEAR(r.p, BruteForceP(a, b), 1e-9) << "trial " << trial;
  }
}

TEST(MannWhitneyTest, NoDifferenceAndNothingToTell) {
  EXPECT_DOUBLE_EQ(MannWhitneyU({5, 5, 5}, {5, 5, 5}).p, 1);   // every value tied
  EXPECT_DOUBLE_EQ(MannWhitneyU({}, {1, 2}).p, 1);
  EXPECT_DOUBLE_EQ(MannWhitneyU({1, 4, 5, 8}, {2, 3, 6, 7}).p, 1);  // U = mean
}

TEST(MannWhitneyTest, LargeSamplesUseTheNormalApproximation) {
  std::vector<double> a, b, c;
  for (int i = 0; i < 40; ++i) {
    a.push_back(i);
    b.push_back(i + 0.5);  // interleaved: no difference
    c.push_back(i + 100);  // all above
  }
  // U = 780 against a mean of 800, variance 40*40*81/12 = 10800: with the
  // continuity correction z = 19.5 / sqrt(10800), p = erfc(z / sqrt 2) = 0.851.
  MannWhitney same = MannWhitneyU(a, b);
  EXPECT_FALSE(same.exact);
  EXPECT_DOUBLE_EQ(same.u, 780);
  EXPECT_NEAR(same.p, std::erfc(19.5 / std::sqrt(10800.0) / std::sqrt(2.0)), 1e-12);
  EXPECT_NEAR(same.p, 0.851, 0.001);
  MannWhitney apart = MannWhitneyU(a, c);
  EXPECT_FALSE(apart.exact);
  EXPECT_LT(apart.p, 1e-10);
  // Ties shrink the variance: 20 zeros + 20 ones against 10 zeros + 30 ones.
  // U = 20*10 + (20*10 + 20*30) / 2 = 600, mean 800; tie groups of 30 and 50
  // give a tie term of 26970 + 124950 over N(N-1) = 6320.
  std::vector<double> x(20, 0), y(10, 0);
  x.resize(40, 1);
  y.resize(40, 1);
  MannWhitney tied = MannWhitneyU(x, y);
  EXPECT_DOUBLE_EQ(tied.u, 600);
  const double var = 1600.0 / 12 * (81 - (26970.0 + 124950.0) / 6320);
  EXPECT_NEAR(tied.p, std::erfc(199.5 / std::sqrt(var) / std::sqrt(2.0)), 1e-12);
  EXPECT_NEAR(tied.p, 0.0221, 0.0005);
}

// The interval's rank k against the textbook critical values of U (two-sided
// alpha 0.05, reject when U <= critical): k = critical + 1. n = m = 5: the
// counts of U = 0, 1, 2, 3 are 1, 1, 2, 3 out of C(10,5) = 252, so
// P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252: k = 3, coverage
// 1 - 8/252. n = m = 4: P(U <= 0) = 1/70 <= 0.025 < 2/70: k = 1. n = m = 3:
// P(U <= 0) = 1/20 > 0.025: no interval (k = 0). n = m = 8: critical 13.
TEST(HodgesLehmannTest, IntervalRankIsTheTextbookCriticalValuePlusOne) {
  double coverage = 0;
  EXPECT_EQ(MannWhitneyIntervalRank(5, 5, 0.05, &coverage), 3);
  EXPECT_NEAR(coverage, 1 - 8.0 / 252, 1e-12);
  EXPECT_EQ(MannWhitneyIntervalRank(4, 4, 0.05, &coverage), 1);
  EXPECT_NEAR(coverage, 1 - 2.0 / 70, 1e-12);
  EXPECT_EQ(MannWhitneyIntervalRank(3, 3, 0.05, &coverage), 0);
  EXPECT_EQ(coverage, 0);
  EXPECT_EQ(MannWhitneyIntervalRank(3, 5, 0.05, nullptr), 1);  // P(U <= 0) = 1/56
  EXPECT_EQ(MannWhitneyIntervalRank(8, 8, 0.05, nullptr), 14);
  EXPECT_EQ(MannWhitneyIntervalRank(10, 10, 0.05, nullptr), 24);  // critical 23
  // 3 vs 3 reaches 75 %: P(U <= 1) = 2/20 <= 0.125 < P(U <= 2) = 4/20.
  EXPECT_EQ(MannWhitneyIntervalRank(3, 3, 0.25, &coverage), 2);
  EXPECT_NEAR(coverage, 0.8, 1e-12);
}

// By hand: a = 10 12 14 16 18, b = 13 15 19 20 24. The 25 differences b - a,
// sorted: -5 -3 -3 -1 -1 1 1 1 2 3 3 3 4 5 5 6 6 7 8 8 9 10 10 12 14. The
// median (13th) is 4; with k = 3 the 95 % interval is [D(3), D(23)] =
// [-3, 10].
TEST(HodgesLehmannTest, ShiftAndIntervalByHand) {
  Shift s = HodgesLehmann({10, 12, 14, 16, 18}, {13, 15, 19, 20, 24}, 0.05);
  EXPECT_DOUBLE_EQ(s.shift, 4);
  ASSERT_TRUE(s.has_interval);
  EXPECT_EQ(s.k, 3);
  EXPECT_DOUBLE_EQ(s.low, -3);
  EXPECT_DOUBLE_EQ(s.high, 10);
  // 4 vs 4, every new value 10 above: the differences run 7..13 (median 10),
  // and k = 1 takes the extremes.
  s = HodgesLehmann({100, 101, 102, 103}, {110, 111, 112, 113}, 0.05);
  EXPECT_DOUBLE_EQ(s.shift, 10);
  EXPECT_DOUBLE_EQ(s.low, 7);
  EXPECT_DOUBLE_EQ(s.high, 13);
  // 3 vs 3 gives an estimate but no 95 % interval, however far apart.
  s = HodgesLehmann({1, 2, 3}, {1001, 1002, 1003}, 0.05);
  EXPECT_DOUBLE_EQ(s.shift, 1000);
  EXPECT_FALSE(s.has_interval);
}

// Above 60 values, the normal approximation: n = m = 40, sd(U) =
// sqrt(1600 * 81 / 12) = 103.92, k = floor(800 - 1.95996 * 103.92) = 596.
TEST(HodgesLehmannTest, LargeSamplesUseTheNormalApproximation) {
  double coverage = 0;
  EXPECT_EQ(MannWhitneyIntervalRank(40, 40, 0.05, &coverage), 596);
  EXPECT_DOUBLE_EQ(coverage, 0.95);
}

}  // namespace
}  // namespace rsslab
