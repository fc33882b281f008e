#include "common/phase.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace rsslab {

std::string PhaseName(v1::Phase phase) {
  if (phase == v1::PHASE_UNSPECIFIED || !v1::Phase_IsValid(phase)) return "";
  absl::string_view name = v1::Phase_Name(phase);
  absl::ConsumePrefix(&name, "PHASE_");
  return absl::AsciiStrToLower(name);
}

std::optional<v1::Phase> ParsePhase(absl::string_view name) {
  // Only lowercase wire names: "FILL" or "PHASE_FILL" are not phases.
  if (name.empty() || absl::AsciiStrToLower(name) != name) return std::nullopt;
  v1::Phase p;
  if (!v1::Phase_Parse(absl::StrCat("PHASE_", absl::AsciiStrToUpper(name)), &p)) {
    return std::nullopt;
  }
  if (p == v1::PHASE_UNSPECIFIED) return std::nullopt;
  return p;
}

std::string AllowedPhases() {
  std::vector<std::string> names;
  for (v1::Phase p : kCyclePhases) names.push_back(PhaseName(p));
  return absl::StrCat(absl::StrJoin(names, ", "), " (or ", PhaseName(v1::PHASE_START), ")");
}

}  // namespace rsslab
