// The walk of glibc's heaps in another process, for BuildInspectReport
// (inspect.h): the resident pages inside free chunks, what malloc_trim(0)
// would give back. Reads /proc/PID/mem and /proc/PID/pagemap only. See
// docs/INSPECT.md.
//
// Example (inside BuildInspectReport, once maps is read):
//   WalkGlibcHeaps(pid, maps_text, r.mutable_heap_walk());
#ifndef RSSLAB_CTL_GLIBC_HEAP_WALK_H_
#define RSSLAB_CTL_GLIBC_HEAP_WALK_H_

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/inspect.pb.h"

namespace rsslab {

// Walks glibc's heaps chunk by chunk through /proc/PID/mem: the brk heap
// (the [heap] line of `maps`) and every thread-arena heap (64 MiB aligned,
// its heap_info checked), and counts the resident pages inside free chunks
// from /proc/PID/pagemap: what malloc_trim(0) would give back. Needs ptrace
// access (root, or the same user where ptrace is allowed); without it, or
// for a layout that is not glibc's, out->walked stays false and out->note
// says why (an arena heap that does not chain is left out of the arena
// figures). Stops after `budget` (out->note says so).
void WalkGlibcHeaps(int pid, absl::string_view maps, rsslab::v1::HeapWalk* out,
                    absl::Duration budget = absl::Seconds(2));

}  // namespace rsslab

#endif  // RSSLAB_CTL_GLIBC_HEAP_WALK_H_
