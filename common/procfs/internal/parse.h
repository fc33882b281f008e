// Parsing helpers shared by the /proc readers: lines, tokens, "1234 kB"
// figures, the path of /proc/<pid>/<name>, and one maps/smaps header line.
// Nothing here allocates on the heap except ProcPath.
//
// Example:
//
//   absl::string_view text = ...;  // smaps
//   while (!text.empty()) {
//     absl::string_view line = rsslab::procfs::internal::NextLine(&text);
//     rsslab::procfs::internal::Vma v;
//     if (rsslab::procfs::internal::ParseHeader(line, &v)) { /* v.path, v.perms */ }
//   }
#ifndef RSSLAB_COMMON_PROCFS_INTERNAL_PARSE_H_
#define RSSLAB_COMMON_PROCFS_INTERNAL_PARSE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace rsslab {
namespace procfs {
namespace internal {

// "/proc/<pid>/<name>"; "/proc/self/<name>" for pid 0.
std::string ProcPath(int pid, absl::string_view name);
// The same path in a caller's buffer: building it must not malloc either.
void ProcPathInto(int pid, absl::string_view name, char* buf, size_t size);

// Splits off the next line (without '\n') from *text.
absl::string_view NextLine(absl::string_view* text);

// Splits off the next whitespace-delimited token from *s.
absl::string_view NextToken(absl::string_view* s);

// "   1234 kB" -> 1234 * 1024; false unless it is a number (unit optional).
bool ParseKb(absl::string_view value, int64_t* bytes);

// One smaps/maps entry, viewing into the text.
struct Vma {
  uint64_t start = 0;
  uint64_t end = 0;
  absl::string_view range;
  absl::string_view perms;
  absl::string_view path;
  int64_t rss = 0;
  int64_t anon = 0;
  int64_t swap = 0;
  int kind = 0;  // smaps.cc's class
};

// A maps/smaps header line starts with a lowercase hex address; smaps field
// lines start with an uppercase key ("Rss:"), so the first byte tells them
// apart. Fills range/perms/path; false if the line is not a header.
bool ParseHeader(absl::string_view line, Vma* vma);

}  // namespace internal
}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_INTERNAL_PARSE_H_
