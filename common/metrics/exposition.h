// Builds Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): one
// HELP and TYPE line per family, then `name{label="value",...} value`.
//
// Example:
//   Exposition e;
//   e.Gauge("rsslab_process_threads", "Threads of the process.", 42);
//   e.Counter("rsslab_requests_total", "Requests served.", 7, {{"phase", "fill"}});
//   e.Counter("rsslab_requests_total", "Requests served.", 3, {{"phase", "shrink"}});
//   std::string body = e.Text();  // served as text/plain; version=0.0.4

#ifndef RSSLAB_COMMON_METRICS_EXPOSITION_H_
#define RSSLAB_COMMON_METRICS_EXPOSITION_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/metrics/latency_histogram.h"

namespace rsslab {
namespace metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

inline constexpr absl::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

class Exposition {
 public:
  // The format wants a family's samples together: samples are kept per
  // family, in the order families first appear, so they may be added in any
  // order (one process's families, then the next process's). HELP/TYPE are
  // written once, from the family's first sample. Integers print exactly.
  void Gauge(absl::string_view name, absl::string_view help, double value,
             const Labels& labels = {});
  void Gauge(absl::string_view name, absl::string_view help, int64_t value,
             const Labels& labels = {});
  void Counter(absl::string_view name, absl::string_view help, uint64_t value,
               const Labels& labels = {});
  void Counter(absl::string_view name, absl::string_view help, double value,
               const Labels& labels = {});
  // A histogram family: name_bucket{le=...}, name_sum, name_count.
  void Histogram(absl::string_view name, absl::string_view help,
                 const LatencyHistogram::Counts& counts, const Labels& labels = {});

  std::string Text() const;

  // "1.5", "42", "+Inf", "NaN": Prometheus's float syntax.
  static std::string FormatDouble(double v);
  // Escapes \, " and newline in a label value.
  static std::string EscapeLabel(absl::string_view v);

 private:
  // Selects (creating at its first sample) the family samples go to.
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  void Sample(absl::string_view name, const Labels& labels, absl::string_view value);

  // Each family's HELP/TYPE lines and samples, in first-seen order.
  std::vector<std::pair<std::string, std::string>> families_;  // name, text
  size_t current_ = 0;
};

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_COMMON_METRICS_EXPOSITION_H_
