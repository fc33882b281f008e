#include "common/ready_line.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/pid.h"

namespace rsslab {

std::string FormatReadyLine(const ReadyLine& r) {
  std::string line = absl::StrCat(kReadyPrefix, "data=", r.data_address,
                                  " control=", r.control_address, " pid=", r.pid);
  if (!r.metrics_address.empty()) absl::StrAppend(&line, " metrics=", r.metrics_address);
  return line;
}

bool IsReadyLine(absl::string_view line) { return absl::StartsWith(line, kReadyPrefix); }

absl::StatusOr<ReadyLine> ParseReadyLine(absl::string_view line) {
  ReadyLine r;
  absl::string_view rest = line;
  if (!absl::ConsumePrefix(&rest, kReadyPrefix)) {
    return absl::InvalidArgumentError(absl::StrCat("not a ready line: '", line, "'"));
  }
  for (absl::string_view f : absl::StrSplit(rest, ' ', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&f, "data=")) r.data_address = std::string(f);
    else if (absl::ConsumePrefix(&f, "control=")) r.control_address = std::string(f);
    else if (absl::ConsumePrefix(&f, "metrics=")) r.metrics_address = std::string(f);
    // Strict (no "0x10", no sign), against the largest pid_max: the program
    // may run on another host with a larger one.
    else if (absl::ConsumePrefix(&f, "pid=")) r.pid = ParsePid(f, "pid", kPidLimit).value_or(0);
  }
  if (r.data_address.empty() || r.control_address.empty() || r.pid <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("malformed ready line: '", line, "'"));
  }
  return r;
}

}  // namespace rsslab
