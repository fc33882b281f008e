// glibc's own per-arena figures: malloc_info(3)'s XML, read into GlibcStats.
//
// Example:
//
//   rsslab::v1::GlibcStats g;
//   if (rsslab::alloc::ReadMallocInfo(&g).ok()) {
//     int arenas = g.malloc_info_arenas();
//   }
#ifndef RSSLAB_MEMORY_ALLOC_MALLOC_INFO_H_
#define RSSLAB_MEMORY_ALLOC_MALLOC_INFO_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace alloc {

// Parses glibc malloc_info(0, fp) XML. Per <heap nr=..>: system current/max,
// free = fast + rest sizes (and counts), in use = system - free, aspace
// total. Top level: total system (current), total free, <total type="mmap">.
// Malformed XML is an InvalidArgument error, never a crash.
absl::Status ParseMallocInfo(absl::string_view xml, rsslab::v1::GlibcStats* out);

// Runs malloc_info(0, ...) into an mmap'd buffer and parses it. glibc only
// (under another allocator it describes glibc's unused heap).
absl::Status ReadMallocInfo(rsslab::v1::GlibcStats* out);

}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_MALLOC_INFO_H_
