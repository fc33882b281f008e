#include "loadgen/results/exit_codes.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace cli {

int Fail(int code, absl::string_view msg) {
  // Messages quote scenario text and peers' errors: each line escaped (ESC
  // or CR cannot forge a line or drive the terminal) and capped, and at most
  // 40 lines.
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(msg, '\n')) {
    if (++lines > 40) {
      fprintf(stderr, "rsslab_loadgen: ... (more lines cut)\n");
      break;
    }
    fprintf(stderr, "rsslab_loadgen: %s\n", Echo(line, 1024).c_str());
  }
  return code;
}

int ExitCodeOf(const absl::Status& s) {
  if (s.ok()) return kExitOk;
  return absl::IsInvalidArgument(s) ? kExitUsage : kExitFailed;
}

}  // namespace cli
}  // namespace rsslab
