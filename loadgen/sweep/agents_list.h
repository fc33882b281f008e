// The agents of a multi-agent sweep (--agent=A,B or --agents_file=FILE):
// HOST:PORT entries, each once, at most 256. The file is read through the
// bounded reader (a device or FIFO refused, 64 KiB at most); `#` starts a
// comment; every entry is checked and echoed escaped.
//
// Example:
//   absl::StatusOr<std::vector<std::string>> a =
//       ParseAgentList("10.0.0.1:50060  # rack 1\n10.0.0.2:50060\n", '\n', "--agents_file=f");
//   // {"10.0.0.1:50060", "10.0.0.2:50060"}
#ifndef RSSLAB_LOADGEN_SWEEP_AGENTS_LIST_H_
#define RSSLAB_LOADGEN_SWEEP_AGENTS_LIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

inline constexpr int kMaxAgents = 256;
inline constexpr size_t kMaxAgentChars = 255;

// Entries separated by `sep` (',' for --agent, '\n' for a file's lines);
// `origin` starts every error. Empty entries are skipped.
absl::StatusOr<std::vector<std::string>> ParseAgentList(absl::string_view text, char sep,
                                                        absl::string_view origin);

// The --agents_file: read bounded, then ParseAgentList by lines.
absl::StatusOr<std::vector<std::string>> ReadAgentsFile(const std::string& path);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_AGENTS_LIST_H_
