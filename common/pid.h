// Parsing a process id a user or a peer typed: decimal digits only (no sign,
// no spaces, no "0x", no leading "+"), at least 1 and below the kernel's
// pid_max (/proc/sys/kernel/pid_max, else 2^22, the largest it can be set
// to; the kernel hands out pids 1 to pid_max - 1). strtol and absl::SimpleAtoi take " 5" and "0x10" as 5 and 16; a
// process id that is not what was typed inspects or signals someone else.
//
// Example:
//   absl::StatusOr<int> pid = rsslab::ParsePid(flag_value, "--pid");
//   if (!pid.ok()) return Die(pid.status());  // "--pid: ' 5' is not a process id (decimal digits only)"
#ifndef RSSLAB_COMMON_PID_H_
#define RSSLAB_COMMON_PID_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

// The largest pid_max the kernel allows: 2^22 (PID_MAX_LIMIT on 64-bit).
inline constexpr int kPidLimit = 1 << 22;

// The running kernel's pid_max (pids are below it): /proc/sys/kernel/pid_max,
// or kPidLimit when it cannot be read or holds something else (never more).
int PidMax();

// `what` names the input in the error ("--pid", "the ready line's pid").
// Errors are one line, InvalidArgument, with the input echoed escaped and
// cut (common/untrusted_text.h).
absl::StatusOr<int> ParsePid(absl::string_view text, absl::string_view what);

// The same, with pid_max given (for tests and callers that already read it).
absl::StatusOr<int> ParsePid(absl::string_view text, absl::string_view what, int pid_max);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_PID_H_
