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
  // Samples of one family must be added one after another (the format
  // wants a family's samples together); HELP/TYPE are written once, at the
  // family's first sample. Integers are printed exactly.
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

  const std::string& Text() const { return text_; }

  // "1.5", "42", "+Inf", "NaN": Prometheus's float syntax.
  static std::string FormatDouble(double v);
  // Escapes \, " and newline in a label value.
  static std::string EscapeLabel(absl::string_view v);

 private:
  void Family(absl::string_view name, absl::string_view type, absl::string_view help);
  void Sample(absl::string_view name, const Labels& labels, absl::string_view value);

  std::string text_;
  std::string family_;
};

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_COMMON_METRICS_EXPOSITION_H_
