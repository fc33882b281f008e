#include "loadgen/results/cli.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_split.h"

namespace rsslab {
namespace cli {

int Fail(int code, absl::string_view msg) {
  for (absl::string_view line : absl::StrSplit(msg, '\n')) {
    fprintf(stderr, "rsslab_loadgen: %s\n", std::string(line).c_str());
  }
  return code;
}

int ExitCodeOf(const absl::Status& s) {
  if (s.ok()) return kExitOk;
  return absl::IsInvalidArgument(s) ? kExitUsage : kExitFailed;
}

}  // namespace cli
}  // namespace rsslab
