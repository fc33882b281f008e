#include "common/metrics/exposition.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace rsslab {
namespace metrics {

std::string Exposition::FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Whole numbers below 2^53 print exactly and without an exponent, so a
  // byte count reads the same as in a snapshot.
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  // The shortest of %.15g..%.17g that reads back as the same double, so
  // 0.00025 prints as 0.00025 and not 0.00025000000000000001.
  char buf[64];
  for (int precision = 15; precision <= 17; ++precision) {
    snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string Exposition::EscapeLabel(absl::string_view v) {
  return absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}});
}

std::string Exposition::Text() const {
  std::string text;
  for (const auto& f : families_) text += f.second;
  return text;
}

void Exposition::Family(absl::string_view name, absl::string_view type, absl::string_view help) {
  if (current_ < families_.size() && families_[current_].first == name) return;
  // Few families (tens): a linear search costs less than a map's nodes.
  for (size_t i = 0; i < families_.size(); ++i) {
    if (families_[i].first == name) {
      current_ = i;
      return;
    }
  }
  current_ = families_.size();
  std::string text;
  // HELP text escapes only \ and newline.
  absl::StrAppend(&text, "# HELP ", name, " ",
                  absl::StrReplaceAll(help, {{"\\", "\\\\"}, {"\n", "\\n"}}), "\n");
  absl::StrAppend(&text, "# TYPE ", name, " ", type, "\n");
  families_.emplace_back(std::string(name), std::move(text));
}

void Exposition::Sample(absl::string_view name, const Labels& labels, absl::string_view value) {
  std::string& out = families_[current_].second;
  out.append(name.data(), name.size());
  if (!labels.empty()) {
    out.push_back('{');
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out.push_back(',');
      absl::StrAppend(&out, labels[i].first, "=\"", EscapeLabel(labels[i].second), "\"");
    }
    out.push_back('}');
  }
  absl::StrAppend(&out, " ", value, "\n");
}

void Exposition::Gauge(absl::string_view name, absl::string_view help, double value,
                       const Labels& labels) {
  Family(name, "gauge", help);
  Sample(name, labels, FormatDouble(value));
}

void Exposition::Gauge(absl::string_view name, absl::string_view help, int64_t value,
                       const Labels& labels) {
  Family(name, "gauge", help);
  Sample(name, labels, absl::StrCat(value));
}

void Exposition::Counter(absl::string_view name, absl::string_view help, uint64_t value,
                         const Labels& labels) {
  Family(name, "counter", help);
  Sample(name, labels, absl::StrCat(value));
}

void Exposition::Counter(absl::string_view name, absl::string_view help, double value,
                         const Labels& labels) {
  Family(name, "counter", help);
  Sample(name, labels, FormatDouble(value));
}

void Exposition::Histogram(absl::string_view name, absl::string_view help,
                           const LatencyHistogram::Counts& counts, const Labels& labels) {
  Family(name, "histogram", help);
  const std::string bucket = absl::StrCat(name, "_bucket");
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    Labels l = labels;
    l.emplace_back("le", FormatDouble(LatencyHistogram::kBoundsSeconds[i]));
    Sample(bucket, l, absl::StrCat(counts.cumulative[i]));
  }
  Labels inf = labels;
  inf.emplace_back("le", "+Inf");
  Sample(bucket, inf, absl::StrCat(counts.count));
  Sample(absl::StrCat(name, "_sum"), labels, FormatDouble(counts.sum_seconds));
  Sample(absl::StrCat(name, "_count"), labels, absl::StrCat(counts.count));
}

}  // namespace metrics
}  // namespace rsslab
