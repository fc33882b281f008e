// Growth of RSS, threads and arenas over a series of points: the soak's
// convergence rule (loadgen's soak analysis runs it per cycle) and the
// per-hour slope `rsslab_ctl inspect --watch` prints. Pure math, no I/O.
//
// Example:
//   std::vector<rsslab::GrowthPoint> pts = {{t0, 100 << 20, 10, 2}, {t1, 140 << 20, 42, 9}};
//   std::vector<rsslab::GrowthStep> steps = rsslab::ComputeGrowth(8.0, pts);
//   // steps[1].flagged: RSS grew more than 8 MiB, or threads grew
//   rsslab::GrowthRate g = rsslab::GrowthPerHour(pts);  // g.rss_bytes_per_hour
#ifndef RSSLAB_COMMON_GROWTH_GROWTH_H_
#define RSSLAB_COMMON_GROWTH_GROWTH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace rsslab {

struct GrowthPoint {
  int64_t unix_nanos = 0;
  int64_t rss = -1;  // bytes; -1: no figure at this point (skipped)
  int threads = -1;
  int arenas = -1;
};

struct GrowthStep {
  bool has_prev = false;     // there is an earlier point with a figure
  int64_t growth_prev = 0;   // rss minus the previous point's
  int64_t growth_first = 0;  // minus the first point's
  int thread_change = 0;     // since the previous point
  int arena_change = 0;
  bool flagged = false;
  std::string flag_reason;   // "post-idle rss +12.0 MiB > 8.0 MiB, threads +32"
};

// One step per point. A point is flagged when its RSS grew more than
// threshold_mb over the previous point's, or its thread count grew: both are
// what a leak looks like, where the first point is only the warm-up.
// `what` names the figure in flag_reason ("post-idle rss" for the soak).
std::vector<GrowthStep> ComputeGrowth(double threshold_mb, const std::vector<GrowthPoint>& points,
                                      const std::string& what = "rss");

struct GrowthRate {
  int points = 0;  // points with a figure
  double hours = 0;  // first to last of them
  // Least-squares slopes per hour (0 with fewer than 2 points or no time).
  double rss_bytes_per_hour = 0;
  double threads_per_hour = 0;
  double arenas_per_hour = 0;
};
GrowthRate GrowthPerHour(const std::vector<GrowthPoint>& points);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_GROWTH_GROWTH_H_
