#include "common/growth/growth.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rsslab {

std::vector<GrowthStep> ComputeGrowth(double threshold_mb, const std::vector<GrowthPoint>& points,
                                      const std::string& what) {
  std::vector<GrowthStep> steps(points.size());
  const GrowthPoint* first = nullptr;
  const GrowthPoint* prev = nullptr;
  const double threshold = threshold_mb * 1048576.0;
  for (size_t i = 0; i < points.size(); ++i) {
    const GrowthPoint& p = points[i];
    GrowthStep& s = steps[i];
    if (p.rss < 0) continue;  // cut short: nothing to compare
    if (first != nullptr) s.growth_first = p.rss - first->rss;
    if (prev != nullptr) {
      s.has_prev = true;
      s.growth_prev = p.rss - prev->rss;
      s.thread_change = p.threads - prev->threads;
      s.arena_change = p.arenas - prev->arenas;
      std::vector<std::string> why;
      if (s.growth_prev > threshold) {
        why.push_back(absl::StrFormat("%s +%.1f MiB > %.1f MiB", what, s.growth_prev / 1048576.0,
                                      threshold_mb));
      }
      if (s.thread_change > 0) why.push_back(absl::StrFormat("threads +%d", s.thread_change));
      s.flagged = !why.empty();
      s.flag_reason = absl::StrJoin(why, ", ");
    }
    prev = &p;
    if (first == nullptr) first = &p;
  }
  return steps;
}

namespace {

// Least-squares slope of y over x (x in hours).
double Slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 2) return 0;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  return sxx > 0 ? sxy / sxx : 0;
}

}  // namespace

GrowthRate GrowthPerHour(const std::vector<GrowthPoint>& points) {
  GrowthRate g;
  std::vector<double> t, rss, threads, arenas;
  int64_t t0 = 0;
  for (const GrowthPoint& p : points) {
    if (p.rss < 0) continue;
    if (t.empty()) t0 = p.unix_nanos;
    t.push_back(static_cast<double>(p.unix_nanos - t0) / 3.6e12);
    rss.push_back(static_cast<double>(p.rss));
    threads.push_back(p.threads);
    arenas.push_back(p.arenas);
  }
  g.points = static_cast<int>(t.size());
  if (t.empty()) return g;
  g.hours = t.back();
  g.rss_bytes_per_hour = Slope(t, rss);
  g.threads_per_hour = Slope(t, threads);
  g.arenas_per_hour = Slope(t, arenas);
  return g;
}

}  // namespace rsslab
