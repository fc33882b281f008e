#include "loadgen/sweep/agents_list.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"
#include "common/files.h"

namespace rsslab {

absl::StatusOr<std::vector<std::string>> ParseAgentList(absl::string_view text, char sep,
                                                        absl::string_view origin) {
  std::vector<std::string> out;
  int n = 0;
  for (absl::string_view entry : absl::StrSplit(text, sep)) {
    ++n;
    // Cut and trimmed in place: views into `text`, never into a temporary
    // (a view of a freed substr() was once dialled as heap garbage).
    absl::string_view a = entry.substr(0, entry.find('#'));
    a = absl::StripAsciiWhitespace(a);
    if (a.empty()) continue;
    const std::string where =
        sep == '\n' ? absl::StrFormat("%s:%d", origin, n) : std::string(origin);
    if (a.size() > kMaxAgentChars) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: an entry of %u characters; an agent is HOST:PORT (at most %u)", where, a.size(),
          kMaxAgentChars));
    }
    if (a.find(':') == absl::string_view::npos ||
        std::any_of(a.begin(), a.end(), [](char c) {
          return absl::ascii_isspace(static_cast<unsigned char>(c)) ||
                 absl::ascii_iscntrl(static_cast<unsigned char>(c));
        })) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: agent \"%s\" is not HOST:PORT", where, Echo(a, 64)));
    }
    if (std::find(out.begin(), out.end(), a) != out.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "agent %s is listed twice: each agent runs one cell at a time, list it once",
          Echo(a, 64)));
    }
    out.emplace_back(a);
    if (static_cast<int>(out.size()) > kMaxAgents) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: more than %d agents", origin, kMaxAgents));
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadAgentsFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, kAgentsFileMaxBytes, "--agents_file");
  if (!text.ok()) return text.status();
  const std::string origin = absl::StrCat("--agents_file=", Echo(path));
  absl::StatusOr<std::vector<std::string>> agents = ParseAgentList(*text, '\n', origin);
  if (agents.ok() && agents->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": no agent in it"));
  }
  return agents;
}

}  // namespace rsslab
