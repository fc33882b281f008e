// /proc/<pid>/maps text: which allocator library is mapped, and where a
// library is.
//
// Example:
//
//   absl::StatusOr<std::string> maps = rsslab::procfs::ReadProcFile(pid, "maps");
//   rsslab::procfs::MappedAllocator a = rsslab::procfs::DetectAllocator(*maps);
//   // a.name == "jemalloc", a.library == "/usr/lib/.../libjemalloc.so.2"
#ifndef RSSLAB_COMMON_PROCFS_MAPS_H_
#define RSSLAB_COMMON_PROCFS_MAPS_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace procfs {

// The allocator mapped into a process.
struct MappedAllocator {
  std::string name;     // glibc | jemalloc | mimalloc | tcmalloc
  std::string library;  // path as mapped (symlinks resolved by the kernel,
                        // e.g. .../libmimalloc.so.2.0); libc's path for glibc
  // No allocator library is mapped, so glibc's own malloc serves: decide on
  // this, not on `name`.
  bool glibc = false;
};

// Finds the allocator library in /proc/<pid>/maps text: a mapping whose file
// name starts with libjemalloc, libmimalloc or libtcmalloc (any gperftools
// flavour: _minimal, _and_profiler, _debug). If several are mapped the first
// in that order wins; with none, glibc (library: the mapped libc, or "").
MappedAllocator DetectAllocator(absl::string_view maps_text);

// True if some mapping's path in maps (or smaps) text contains `substring`.
// Only the path column is searched, so hex addresses never match.
bool IsMapped(absl::string_view maps_text, absl::string_view substring);

// The path of the first mapping whose file name (basename) starts with
// `prefix` and, if `contains` is not empty, also contains it; "" if none.
//   MappedPath(maps, "libopenblas")  // ".../libopenblasp-r0.3.21.so"
//   MappedPath(maps, "_rsslab", ".so")
std::string MappedPath(absl::string_view maps_text, absl::string_view prefix,
                       absl::string_view contains = "");
// The path of the first mapping for which match(path) is true; "" if none.
std::string FirstMappedPath(absl::string_view maps_text,
                            absl::FunctionRef<bool(absl::string_view path)> match);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_MAPS_H_
