#include "exporter/recycling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rsslab {
namespace exporter {
namespace {

enum class Field { kMaxRequests, kJitter, kRssLimit };

struct Flag {
  const char* name;
  Field field;
  int64_t unit;  // bytes per unit for an RSS limit, else 1
};

// Flag names are each server's own; --max-requests is gunicorn's and uWSGI's.
constexpr Flag kFlags[] = {
    {"--max-requests", Field::kMaxRequests, 1},          // gunicorn, uWSGI
    {"--max-requests-jitter", Field::kJitter, 1},        // gunicorn
    {"--max-tasks-per-child", Field::kMaxRequests, 1},   // Celery
    {"--reload-on-rss", Field::kRssLimit, 1 << 20},      // uWSGI, MiB
    {"--max-memory-per-child", Field::kRssLimit, 1024},  // Celery, KiB
};

constexpr int64_t kMaxValue = int64_t{1} << 40;
constexpr size_t kMaxArgs = 4096;

void Set(const Flag& f, absl::string_view value, RecyclingLimits* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 0 || v > kMaxValue) {
    out->errors.push_back(absl::StrCat(f.name, ": '", value.substr(0, 64),
                                       "' is not a whole number from 0 to 2^40"));
    return;
  }
  switch (f.field) {
    case Field::kMaxRequests:
      out->max_requests = v;
      out->max_requests_flag = f.name;
      break;
    case Field::kJitter:
      out->max_requests_jitter = v;
      break;
    case Field::kRssLimit:
      out->rss_limit_bytes = v * f.unit;
      out->rss_limit_flag = f.name;
      break;
  }
}

}  // namespace

RecyclingLimits ParseRecyclingLimits(absl::string_view cmdline) {
  absl::ConsumeSuffix(&cmdline, absl::string_view("\0", 1));  // each argument ends with NUL
  std::vector<absl::string_view> args = absl::StrSplit(cmdline, '\0');
  if (args.size() > kMaxArgs) args.resize(kMaxArgs);
  RecyclingLimits out;
  for (size_t i = 0; i < args.size(); ++i) {
    const absl::string_view a = args[i];
    for (const Flag& f : kFlags) {
      const absl::string_view name = f.name;
      if (a == name) {
        if (i + 1 < args.size()) {
          Set(f, args[++i], &out);
        } else {
          out.errors.push_back(absl::StrCat(f.name, ": no value"));
        }
      } else if (a.size() > name.size() && a.substr(0, name.size()) == name &&
                 a[name.size()] == '=') {
        Set(f, a.substr(name.size() + 1), &out);
      }
    }
  }
  if (out.max_requests == 0) out.max_requests_flag.clear();  // 0 disables it
  if (out.rss_limit_bytes == 0) out.rss_limit_flag.clear();
  return out;
}

RecyclingAdvice Advise(const RecyclingLimits& limits, const RetentionSample& s,
                       int64_t budget_bytes) {
  RecyclingAdvice a;
  a.limit_below_fresh = limits.rss_limit_bytes > 0 && limits.rss_limit_bytes <= s.first_rss;
  if (s.requests < s.first_requests || s.requests - s.first_requests < kMinRequestsForGrowth) {
    return a;
  }
  a.has_growth = true;
  a.growth_per_request = static_cast<double>(std::max<int64_t>(0, s.max_rss - s.first_rss)) /
                         static_cast<double>(s.requests - s.first_requests);
  const int64_t budget = limits.rss_limit_bytes > 0 ? limits.rss_limit_bytes : budget_bytes;
  if (a.growth_per_request > 0 && budget > s.first_rss) {
    a.has_suggested_max_requests = true;
    a.suggested_max_requests = static_cast<int64_t>(std::min(
        1e9, std::floor(static_cast<double>(budget - s.first_rss) / a.growth_per_request)));
  }
  if (limits.max_requests > 0) {
    a.has_suggested_rss_limit = true;
    // In double, capped: a huge growth times 2^40 requests stays in range.
    const double at_limit =
        static_cast<double>(s.first_rss) +
        a.growth_per_request *
            static_cast<double>(limits.max_requests + limits.max_requests_jitter);
    a.suggested_rss_limit_bytes = static_cast<int64_t>(std::llround(std::min(at_limit, 0x1p62)));
  }
  return a;
}

}  // namespace exporter
}  // namespace rsslab
