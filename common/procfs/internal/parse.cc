#include "common/procfs/internal/parse.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace rsslab {
namespace procfs {
namespace internal {

std::string ProcPath(int pid, absl::string_view name) {
  if (pid == 0) return absl::StrCat("/proc/self/", name);
  return absl::StrCat("/proc/", pid, "/", name);
}

// The same path in a caller's buffer: building it must not malloc either.
void ProcPathInto(int pid, absl::string_view name, char* buf, size_t size) {
  if (pid == 0) {
    snprintf(buf, size, "/proc/self/%.*s", static_cast<int>(name.size()), name.data());
  } else {
    snprintf(buf, size, "/proc/%d/%.*s", pid, static_cast<int>(name.size()), name.data());
  }
}

// Splits off the next line (without '\n') from *text.
absl::string_view NextLine(absl::string_view* text) {
  size_t nl = text->find('\n');
  absl::string_view line = text->substr(0, nl);
  text->remove_prefix(nl == absl::string_view::npos ? text->size() : nl + 1);
  return line;
}

// Splits off the next whitespace-delimited token from *s.
absl::string_view NextToken(absl::string_view* s) {
  *s = absl::StripLeadingAsciiWhitespace(*s);
  size_t end = 0;
  while (end < s->size() && !absl::ascii_isspace((*s)[end])) ++end;
  absl::string_view tok = s->substr(0, end);
  s->remove_prefix(end);
  return tok;
}

// "   1234 kB" -> 1234 * 1024; false unless it is a number (unit optional).
bool ParseKb(absl::string_view value, int64_t* bytes) {
  absl::string_view num = NextToken(&value);
  int64_t kb = 0;
  if (!absl::SimpleAtoi(num, &kb)) return false;
  absl::string_view unit = NextToken(&value);
  *bytes = unit == "kB" ? kb * 1024 : kb;
  return true;
}

bool ParseHeader(absl::string_view line, Vma* vma) {
  if (line.empty() || !(absl::ascii_isdigit(line[0]) ||
                        (line[0] >= 'a' && line[0] <= 'f'))) {
    return false;
  }
  absl::string_view rest = line;
  vma->range = NextToken(&rest);
  size_t dash = vma->range.find('-');
  if (dash == absl::string_view::npos ||
      !absl::SimpleHexAtoi(vma->range.substr(0, dash), &vma->start) ||
      !absl::SimpleHexAtoi(vma->range.substr(dash + 1), &vma->end) ||
      vma->end < vma->start) {
    return false;
  }
  vma->perms = NextToken(&rest);
  NextToken(&rest);  // offset
  NextToken(&rest);  // device
  NextToken(&rest);  // inode
  // The path is the rest of the line and may contain spaces.
  vma->path = absl::StripAsciiWhitespace(rest);
  return vma->perms.size() == 4;
}

}  // namespace internal
}  // namespace procfs
}  // namespace rsslab
