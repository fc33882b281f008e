#include "common/auto_trim_table.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/untrusted_text.h"
#include "common/units.h"

namespace rsslab {
namespace {

constexpr double kHour_s = 3600;
constexpr double kWeek_s = 7 * 86400;

// Whole numbers as integers (1073741824, not 1.07374e+09), others shortest.
std::string Number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrFormat("%.15g", v);
}

}  // namespace

const std::vector<AutoTrimModeEntry>& AutoTrimModes() {
  static const auto* modes = new std::vector<AutoTrimModeEntry>{
      {"off", AutoTrimMode::kOff},
      {"after_burst", AutoTrimMode::kAfterBurst},
      {"interval", AutoTrimMode::kInterval},
  };
  return *modes;
}

const std::vector<AutoTrimKnob>& AutoTrimKnobs() {
  // A settle fraction of 1 or more would count any load as dropped; 0.99
  // is the largest that still means "load fell".
  static const auto* knobs = new std::vector<AutoTrimKnob>{
      {"gap_mb", "auto_trim_gap_mb", 0, static_cast<double>(kMaxMiB)},
      {"settle_s", "auto_trim_settle_ms", 0, kHour_s, 1000},
      {"settle_fraction", "auto_trim_settle_fraction", 0, 0.99, 1, false},
      {"interval_s", "auto_trim_interval_s", 1, kWeek_s},
      {"min_spacing_s", "auto_trim_min_spacing_s", 0, kWeek_s},
      // The server samples every 200 ms, fixed; the package lets it be set.
      {"tick_s", "", 0.01, 60},
  };
  return *knobs;
}

const AutoTrimKnob& AutoTrimKnobByKeyword(absl::string_view keyword) {
  for (const AutoTrimKnob& k : AutoTrimKnobs()) {
    if (keyword == k.keyword) return k;
  }
  fprintf(stderr, "memory/trim/auto_trim_table: no knob %s\n", std::string(keyword).c_str());
  abort();
}

const AutoTrimKnob* FindAutoTrimFlag(absl::string_view flag) {
  for (const AutoTrimKnob& k : AutoTrimKnobs()) {
    if (*k.flag != '\0' && flag == k.flag) return &k;
  }
  return nullptr;
}

std::string AutoTrimKnobName(const AutoTrimKnob& knob, AutoTrimCaller caller) {
  if (caller == AutoTrimCaller::kServerFlag) return absl::StrCat("--", knob.flag);
  return absl::StrCat("auto_trim(", knob.keyword, "=)");
}

absl::Status CheckAutoTrimValue(const AutoTrimKnob& knob, double value, AutoTrimCaller caller) {
  const double scale = caller == AutoTrimCaller::kServerFlag ? knob.flag_scale : 1;
  const double lo = knob.lo * scale, hi = knob.hi * scale;
  // Written so NaN fails: every comparison with NaN is false.
  if (std::isfinite(value) && value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(AutoTrimKnobName(knob, caller),
                                                 " must be between ", Number(lo), " and ",
                                                 Number(hi), "; got ", Number(value)));
}

absl::StatusOr<AutoTrimMode> ParseAutoTrimMode(absl::string_view s, absl::string_view what) {
  for (const AutoTrimModeEntry& m : AutoTrimModes()) {
    if (s == m.name) return m.mode;
  }
  std::vector<std::string> names;
  for (const AutoTrimModeEntry& m : AutoTrimModes()) names.push_back(m.name);
  const std::string last = names.back();
  names.pop_back();
  return absl::InvalidArgumentError(absl::StrCat(what, " must be ", absl::StrJoin(names, ", "),
                                                 " or ", last, "; got '", Echo(s, 64), "'"));
}

const char* AutoTrimModeName(AutoTrimMode mode) {
  for (const AutoTrimModeEntry& m : AutoTrimModes()) {
    if (m.mode == mode) return m.name;
  }
  return "off";
}

std::string AutoTrimModeNames(absl::string_view sep) {
  return absl::StrJoin(AutoTrimModes(), sep,
                       [](std::string* out, const AutoTrimModeEntry& m) { out->append(m.name); });
}

}  // namespace rsslab
