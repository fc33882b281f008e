#include "common/pid.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace {

// Decimal digits only: the value, saturated just above kPidLimit (so no
// length of input can overflow, and leading zeros still count as decimal);
// -1 for anything else (empty, sign, space, "0x", non-ASCII digits).
int64_t Digits(absl::string_view s) {
  if (s.empty()) return -1;
  int64_t v = 0;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return -1;
    v = v * 10 + (c - '0');
    if (v > kPidLimit) v = int64_t{kPidLimit} + 1;
  }
  return v;
}

}  // namespace

int PidMax() {
  // Read on each call: one small procfs file, never stale after a sysctl.
  int fd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return kPidLimit;
  char buf[32];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return kPidLimit;
  absl::string_view v(buf, static_cast<size_t>(n));
  v = absl::StripTrailingAsciiWhitespace(v);
  const int64_t max = Digits(v);
  return max > 1 && max <= kPidLimit ? static_cast<int>(max) : kPidLimit;
}

absl::StatusOr<int> ParsePid(absl::string_view text, absl::string_view what) {
  return ParsePid(text, what, PidMax());
}

absl::StatusOr<int> ParsePid(absl::string_view text, absl::string_view what, int pid_max) {
  if (text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": empty, expected a process id"));
  }
  const int64_t v = Digits(text);
  if (v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": '", Echo(text, 32), "' is not a process id (decimal digits only: no sign, spaces or 0x)"));
  }
  if (v == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": 0 is not a process id"));
  if (v >= pid_max) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", Echo(text, 32),
                                                   " is not below the kernel's pid_max (", pid_max,
                                                   "): no process can have it"));
  }
  return static_cast<int>(v);
}

}  // namespace rsslab
