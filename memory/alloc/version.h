// Which allocator version a snapshot recorded, as one short text for tables
// ("mimalloc 3.0.1", "jemalloc 5.3.0", "glibc 2.36", "gperftools 2.10"),
// from the snapshot alone, so a summary built from old events still names
// the version they measured. No dlsym, no allocator: a reader's library.
//
//   rsslab::v1::Snapshot snap = ...;  // from events.jsonl
//   std::string v = rsslab::alloc::AllocatorVersionText(snap);
//   // "mimalloc 2.0.9" for old 2.0.9 cells (mi_version 209 recorded),
//   // "mimalloc (libmimalloc.so.3.0)" when only the library path says it.
#ifndef RSSLAB_MEMORY_ALLOC_VERSION_H_
#define RSSLAB_MEMORY_ALLOC_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace alloc {

// "3.0.1" for 301 (mi_version's major*100 + minor*10 + patch, used through
// 3.0.9); "mi_version N" where that reading is ambiguous.
std::string MimallocVersionText(int version);

// The allocator family and version the snapshot recorded: the version the
// allocator reported (MimallocStats.version_text, else its mi_version;
// jemalloc's "version" up to the git suffix; GlibcStats / TcmallocStats
// version), else the family and the mapped library's file name when it
// carries more than glibc's "libc.so.6", else the family alone. "" when the
// snapshot names no allocator.
std::string AllocatorVersionText(const rsslab::v1::Snapshot& snap);

// The same from a family and library path alone (a cell result's
// mapped_library): "mimalloc (libmimalloc.so.2.0)", "glibc".
std::string LibraryVersionText(absl::string_view family, absl::string_view library);

}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_VERSION_H_
