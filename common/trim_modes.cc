#include "common/trim_modes.h"

#include "absl/strings/str_cat.h"

namespace rsslab {
namespace {

constexpr size_t kCount = sizeof(kTrimModes) / sizeof(kTrimModes[0]);

// "a, b, c or d" over the table, each entry as `part` renders it.
template <typename Part>
std::string Listed(Part part) {
  std::string out;
  for (size_t i = 0; i < kCount; ++i) {
    if (i > 0) out += i + 1 == kCount ? " or " : ", ";
    out += part(kTrimModes[i]);
  }
  return out;
}

}  // namespace

const char* TrimModeName(v1::TrimMode mode) {
  for (const TrimModeInfo& m : kTrimModes) {
    if (m.mode == mode) return m.name;
  }
  return "";
}

std::optional<v1::TrimMode> ParseTrimModeName(absl::string_view name) {
  if (name == "global_only") return v1::TRIM_GLOBAL_ONLY;
  for (const TrimModeInfo& m : kTrimModes) {
    if (name == m.name) return m.mode;
  }
  return std::nullopt;
}

std::string TrimModeNames() {
  return Listed([](const TrimModeInfo& m) { return std::string(m.name); });
}

std::string TrimModeAlternatives() {
  std::string out;
  for (const TrimModeInfo& m : kTrimModes) absl::StrAppend(&out, out.empty() ? "" : "|", m.name);
  return out;
}

std::string TrimModeChoices() {
  return Listed([](const TrimModeInfo& m) {
    return absl::StrCat(static_cast<int>(m.mode), " (", m.spoken, ")");
  });
}

}  // namespace rsslab
