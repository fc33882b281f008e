// The two-sided Mann-Whitney U test (Wilcoxon rank-sum) that
// `rsslab_loadgen compare` uses to say whether a figure changed between two
// sets of repeats.
//
//   rsslab::MannWhitney r = rsslab::MannWhitneyU({120.1, 121.4, 119.8, 122.0},
//                                                {110.2, 111.0, 109.7, 112.3});
//   // r.u = 16 (every base value above every new one), r.p = 2/70 = 0.029,
//   // r.exact = true, r.min_p = 0.029
//
// Why this test: repeats are few (3 to 5 per cell), allocator figures are not
// normally distributed (a decay timer that fires or not splits a cell's
// repeats into two clusters), and one outlier must not decide the verdict.
// The U test assumes neither normality nor equal variances, and only the
// order of the values matters. With so few values the normal approximation is
// poor, so the p-value comes from the exact distribution of U: every way of
// splitting the pooled values into groups of n and m is equally likely under
// "no difference", and p is the share of splits whose U is at least as far
// from its mean n*m/2 as the observed one. Ties get midranks and the exact
// distribution is then the permutation distribution of those midranks (what a
// textbook calls the exact conditional test); without ties it equals the
// classic table (and scipy.stats.mannwhitneyu(method="exact")).
//
// The smallest p a test of n against m values can give is 2 / C(n+m, n):
// 0.100 for 3 vs 3, 0.057 for 3 vs 4, 0.029 for 4 vs 4, 0.008 for 5 vs 5. So
// at alpha 0.05, 3 repeats per side can never show a significant change: use
// at least 4 per side (or 3 against 5).
#ifndef RSSLAB_LOADGEN_RESULTS_MANN_WHITNEY_H_
#define RSSLAB_LOADGEN_RESULTS_MANN_WHITNEY_H_

#include <vector>

namespace rsslab {

struct MannWhitney {
  double u = 0;        // U of the first sample: pairs (a > b) + half the ties
  double p = 1;        // two-sided p-value
  bool exact = false;  // p from the exact distribution (else normal approx.)
  double min_p = 1;    // the smallest p these sample sizes can give
};

// Above this many values in total the exact distribution is replaced by the
// normal approximation with tie and continuity corrections (it is accurate
// there, and the exact counts would cost memory for nothing).
inline constexpr int kMannWhitneyExactMaxTotal = 60;

// An empty sample gives p = 1. NaN values must not be passed.
MannWhitney MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b);

// 2 / C(n+m, n), capped at 1: the smallest two-sided p of an exact test of
// n against m distinct values (complete separation).
double MannWhitneyMinP(int n, int m);

// The Hodges-Lehmann estimate of the shift from a to b, with its
// distribution-free confidence interval (Hollander & Wolfe, "Nonparametric
// Statistical Methods", the two-sample location problem):
//
//   the n*m pairwise differences b_j - a_i, sorted: D(1) <= ... <= D(nm);
//   shift = their median;
//   interval = [D(k), D(nm + 1 - k)], where k is the largest integer with
//   P(U <= k - 1) <= alpha / 2 under "no difference", U's exact
//   distribution for distinct values (normal approximation above
//   kMannWhitneyExactMaxTotal values). Its coverage is 1 - 2 P(U <= k - 1),
//   at least 1 - alpha.
//
//   // 4 vs 4: k = 1 (P(U <= 0) = 1/70 <= 0.025 < P(U <= 1) = 2/70), the
//   // interval is [smallest, largest difference] with coverage 68/70.
//   rsslab::Shift s = rsslab::HodgesLehmann({100, 101, 102, 103},
//                                           {110, 111, 112, 113}, 0.05);
//   // s.shift = 10, s.low = 7, s.high = 13, s.has_interval = true
//
// k = 0 means no interval reaches 1 - alpha with these sample sizes (3 vs 3
// at alpha 0.05: the most extreme split alone has probability 2/20 = 0.1):
// has_interval is false. Ties in the data leave the estimate as it is; the
// interval then uses the critical value for distinct values, as usual.
struct Shift {
  double shift = 0;          // median of b_j - a_i
  double low = 0, high = 0;  // the interval, when has_interval
  bool has_interval = false;
  double coverage = 0;       // 1 - 2 P(U <= k - 1) (exact), or the asked 1 - alpha
  int k = 0;                 // the rank of the interval's ends
};
Shift HodgesLehmann(const std::vector<double>& a, const std::vector<double>& b, double alpha);

// The k above for n against m values (0 when none reaches 1 - alpha), and
// *coverage (may be null) set to the interval's coverage.
int MannWhitneyIntervalRank(int n, int m, double alpha, double* coverage);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_MANN_WHITNEY_H_
