#include "agent/stop_outcome.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace launch {

absl::StatusOr<std::vector<int>> ParseOkExitCodes(absl::string_view list, absl::string_view flag) {
  std::vector<int> out;
  if (list.size() > 256) return absl::InvalidArgumentError(absl::StrCat(flag, ": longer than 256 characters"));
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int code = -1;
    if (!absl::SimpleAtoi(item, &code) || code < 0 || code > 255 ||
        item.find_first_not_of("0123456789") != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, "=", Echo(list, 64), ": '", Echo(item, 16),
          "' is not an exit code (0..255; comma-separated, e.g. 0,143)"));
    }
    if (std::find(out.begin(), out.end(), code) != out.end()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, "=", Echo(list, 64), ": ", code, " given twice"));
    }
    out.push_back(code);
  }
  if (out.size() > 32) return absl::InvalidArgumentError(absl::StrCat(flag, ": more than 32 codes"));
  return out;
}

StopVerdict JudgeStop(const Ended& e, const std::vector<int>& ok) {
  StopVerdict v;
  if (e.ended_before_stop) {
    v.ending = Ending::kDiedBeforeStop;
    v.why = "died before stop";
    return v;
  }
  if (e.term_signal == SIGTERM) {
    v.ending = Ending::kNormalStop;  // the stop itself: SIGTERM's default action
    return v;
  }
  if (e.term_signal == 0 && e.exit_code >= 0 &&
      std::find(ok.begin(), ok.end(), e.exit_code) != ok.end()) {
    v.ending = Ending::kNormalStop;
    return v;
  }
  v.ending = Ending::kBadStop;
  if (e.term_signal == SIGKILL) {
    v.why = "killed by SIGKILL after stop (it did not exit within the grace period)";
  } else if (e.term_signal != 0) {
    const char* abbrev = sigabbrev_np(e.term_signal);
    v.why = absl::StrCat("killed by ", abbrev ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", e.term_signal),
                         " after stop");
  } else if (e.exit_code >= 0) {
    v.why = absl::StrCat("exited ", e.exit_code, " after stop (not in --ok_exit_codes=",
                         absl::StrJoin(ok, ","), ")");
  } else {
    v.why = "its exit status is unknown";
  }
  return v;
}

bool EndedOrEnding(int pid) {
  std::string stat;
  FILE* f = fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "re");
  if (f == nullptr) return true;  // gone
  char buf[1024];
  const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  stat.assign(buf, n);
  // Fields after the command's closing parenthesis: state (3), ... flags (9).
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::vector<std::string> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 1), ' ', absl::SkipEmpty());
  if (fields.size() < 7) return false;
  if (fields[0] == "Z" || fields[0] == "X" || fields[0] == "x") return true;
  constexpr uint64_t kPfExiting = 0x4;  // include/linux/sched.h
  uint64_t flags = 0;
  return absl::SimpleAtoi(fields[6], &flags) && (flags & kPfExiting) != 0;
}

}  // namespace launch
}  // namespace rsslab
