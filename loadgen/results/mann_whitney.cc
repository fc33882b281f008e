#include "loadgen/results/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace rsslab {
namespace {

// C(n, k) as a double (exact up to 2^53, close enough beyond).
double Choose(int n, int k) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

}  // namespace

double MannWhitneyMinP(int n, int m) {
  if (n <= 0 || m <= 0) return 1;
  return std::min(1.0, 2.0 / Choose(n + m, n));
}

MannWhitney MannWhitneyU(const std::vector<double>& a, const std::vector<double>& b) {
  MannWhitney r;
  const int n = static_cast<int>(a.size());
  const int m = static_cast<int>(b.size());
  r.min_p = MannWhitneyMinP(n, m);
  if (n == 0 || m == 0) return r;
  const int total = n + m;

  // Pooled values sorted, each with its group; ranks are doubled midranks so
  // that ties stay integers (a tie over sorted positions i..j gets i+j+2).
  std::vector<std::pair<double, int>> pooled;
  pooled.reserve(total);
  for (double v : a) pooled.push_back({v, 0});
  for (double v : b) pooled.push_back({v, 1});
  std::sort(pooled.begin(), pooled.end());
  std::vector<int> rank2(total);
  double tie_term = 0;  // sum of t^3 - t over tie groups
  for (int i = 0; i < total;) {
    int j = i;
    while (j + 1 < total && pooled[j + 1].first == pooled[i].first) ++j;
    for (int k = i; k <= j; ++k) rank2[k] = i + j + 2;
    const double t = j - i + 1;
    tie_term += t * t * t - t;
    i = j + 1;
  }
  long long r2 = 0;  // doubled rank sum of the first sample
  for (int k = 0; k < total; ++k) {
    if (pooled[k].second == 0) r2 += rank2[k];
  }
  // Doubled U and its mean under "no difference" (n*m/2, doubled).
  const long long u2 = r2 - static_cast<long long>(n) * (n + 1);
  const long long mean2 = static_cast<long long>(n) * m;
  r.u = u2 / 2.0;

  if (total <= kMannWhitneyExactMaxTotal) {
    // count[k][s]: how many k-subsets of the pooled values have doubled rank
    // sum s; every n-subset is one equally likely split.
    const int max_sum = 2 * total * n + 1;
    std::vector<std::vector<double>> count(n + 1, std::vector<double>(max_sum + 1, 0));
    count[0][0] = 1;
    for (int item = 0; item < total; ++item) {
      const int w = rank2[item];
      for (int k = std::min(n, item + 1); k >= 1; --k) {
        for (int s = max_sum; s >= w; --s) count[k][s] += count[k - 1][s - w];
      }
    }
    const long long dist = std::llabs(u2 - mean2);
    double tail = 0;
    for (int s = 0; s <= max_sum; ++s) {
      if (count[n][s] == 0) continue;
      const long long us2 = s - static_cast<long long>(n) * (n + 1);
      if (std::llabs(us2 - mean2) >= dist) tail += count[n][s];
    }
    r.p = std::min(1.0, tail / Choose(total, n));
    r.exact = true;
    return r;
  }

  const double mu = n * static_cast<double>(m) / 2;
  const double var = n * static_cast<double>(m) / 12 *
                     ((total + 1) - tie_term / (static_cast<double>(total) * (total - 1)));
  if (var <= 0) return r;  // every value equal: nothing to tell apart
  const double z = std::max(0.0, std::fabs(r.u - mu) - 0.5) / std::sqrt(var);
  r.p = std::min(1.0, std::erfc(z / std::sqrt(2.0)));
  return r;
}

int MannWhitneyIntervalRank(int n, int m, double alpha, double* coverage) {
  if (coverage != nullptr) *coverage = 0;
  if (n <= 0 || m <= 0 || !(alpha > 0 && alpha < 1)) return 0;
  const int total = n + m;
  const double nm = static_cast<double>(n) * m;
  if (total > kMannWhitneyExactMaxTotal) {
    // Normal approximation: k = floor(nm/2 - z(1 - alpha/2) sd(U)), with z
    // found by bisection on erfc (no inverse in <cmath>).
    double lo = 0, hi = 40;
    for (int i = 0; i < 200; ++i) {
      const double mid = (lo + hi) / 2;
      (std::erfc(mid / std::sqrt(2.0)) > alpha ? lo : hi) = mid;
    }
    const double sd = std::sqrt(nm * (total + 1) / 12);
    const int k = std::max(0, static_cast<int>(std::floor(nm / 2 - lo * sd)));
    if (coverage != nullptr && k > 0) *coverage = 1 - alpha;
    return k;
  }
  // count[j][s]: j-subsets of the ranks 0..total-1 with sum s; U of such a
  // subset as the first sample is s - j(j-1)/2, from 0 to n*m.
  const int max_sum = total * n;
  std::vector<std::vector<double>> count(n + 1, std::vector<double>(max_sum + 1, 0));
  count[0][0] = 1;
  for (int item = 0; item < total; ++item) {
    for (int j = std::min(n, item + 1); j >= 1; --j) {
      for (int s = max_sum; s >= item; --s) count[j][s] += count[j - 1][s - item];
    }
  }
  const double all = Choose(total, n);
  const int offset = n * (n - 1) / 2;
  double cdf = 0;  // P(U <= c)
  int k = 0;
  for (int c = 0; c <= static_cast<int>(nm); ++c) {
    const double next = cdf + count[n][c + offset] / all;
    if (next > alpha / 2) break;
    cdf = next;
    k = c + 1;  // P(U <= k - 1) = cdf <= alpha / 2
  }
  if (coverage != nullptr && k > 0) *coverage = 1 - 2 * cdf;
  return k;
}

Shift HodgesLehmann(const std::vector<double>& a, const std::vector<double>& b, double alpha) {
  Shift r;
  if (a.empty() || b.empty()) return r;
  std::vector<double> d;
  d.reserve(a.size() * b.size());
  for (double x : a) {
    for (double y : b) d.push_back(y - x);
  }
  std::sort(d.begin(), d.end());
  const size_t n = d.size();
  r.shift = n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2;
  r.k = MannWhitneyIntervalRank(static_cast<int>(a.size()), static_cast<int>(b.size()), alpha,
                                &r.coverage);
  if (r.k > 0 && static_cast<size_t>(r.k) <= n) {
    r.has_interval = true;
    r.low = d[r.k - 1];
    r.high = d[n - r.k];
  }
  return r;
}

}  // namespace rsslab
