// What a worker's observed retention means for the recycling limits its
// server was started with (docs/METRICS.md, "Recycling advice"): gunicorn
// --max-requests and --max-requests-jitter, uWSGI --max-requests and
// --reload-on-rss, Celery --max-tasks-per-child and --max-memory-per-child,
// read from the command line (a forked worker's is its master's).
//
//   RecyclingLimits l = ParseRecyclingLimits(proc_pid_cmdline_text);
//   RecyclingAdvice a = Advise(l, {first_rss, first_requests, max_rss, requests}, budget);
//   if (a.limit_below_fresh) ...  // every fresh worker starts above its limit
#ifndef RSSLAB_EXPORTER_RECYCLING_H_
#define RSSLAB_EXPORTER_RECYCLING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rsslab {
namespace exporter {

// The limits a command line sets; 0: not set (as 0 disables each in its server).
struct RecyclingLimits {
  int64_t max_requests = 0;         // requests (Celery: tasks) before a worker is replaced
  std::string max_requests_flag;    // the flag that set it, e.g. "--max-requests"
  int64_t max_requests_jitter = 0;  // gunicorn: up to this many more
  int64_t rss_limit_bytes = 0;      // RSS above which a worker is replaced
  std::string rss_limit_flag;       // "--reload-on-rss" (MiB) or "--max-memory-per-child" (KiB)
  std::vector<std::string> errors;  // one line per flag whose value was refused
};

// `cmdline`: /proc/PID/cmdline (arguments separated by NUL). Takes
// "--flag N" and "--flag=N"; a value that is not a whole number from 0 to
// 2^40 (in the flag's unit) is refused with a line in `errors`. At most
// the first 4096 arguments are read.
RecyclingLimits ParseRecyclingLimits(absl::string_view cmdline);

// One worker as the exporter has followed it: its first scrape and now.
struct RetentionSample {
  int64_t first_rss = 0;        // RSS at the exporter's first scrape of the worker
  uint64_t first_requests = 0;  // its request count then
  int64_t max_rss = 0;          // the highest RSS seen since (a trim does not hide growth)
  uint64_t requests = 0;        // its request count now
};

// Requests since the first scrape below which no growth rate is given (a
// few requests' RSS is noise).
inline constexpr uint64_t kMinRequestsForGrowth = 100;

struct RecyclingAdvice {
  // (max_rss - first_rss) / (requests - first_requests), at least 0.
  bool has_growth = false;
  double growth_per_request = 0;
  // floor((B - first_rss) / growth): requests until the worker reaches B,
  // B = the RSS limit configured, else `budget_bytes`. Needs growth > 0
  // and B > first_rss; at most 10^9.
  bool has_suggested_max_requests = false;
  int64_t suggested_max_requests = 0;
  // first_rss + growth x (max_requests + jitter), at most 2^62: the RSS a
  // worker reaches when its request limit replaces it; an RSS limit there
  // replaces it no later. Needs a max_requests setting and the growth.
  bool has_suggested_rss_limit = false;
  int64_t suggested_rss_limit_bytes = 0;
  // An RSS limit at or below the worker's first RSS: a fresh worker is over
  // its limit before it serves, so workers are replaced after every
  // request (they loop).
  bool limit_below_fresh = false;
};

// `budget_bytes`: memory a worker may use when no RSS limit is set (the
// exporter: 90 % of the cgroup's limit shared by the workers), <= 0: none.
RecyclingAdvice Advise(const RecyclingLimits& limits, const RetentionSample& s,
                       int64_t budget_bytes);

}  // namespace exporter
}  // namespace rsslab

#endif  // RSSLAB_EXPORTER_RECYCLING_H_
