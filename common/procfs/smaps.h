// /proc/<pid>/smaps, every mapping put in one class (heap, arena, stack,
// special, file, anon) so the classes' RSS adds up to the process's.
//
// Example:
//
//   rsslab::v1::MemoryMap map;
//   absl::Status s = rsslab::procfs::ReadSmaps(0, /*detail_top_n=*/5, &map);
//   // map.arena_count(): glibc thread-arena heaps; map.stack_count(): stacks
#ifndef RSSLAB_COMMON_PROCFS_SMAPS_H_
#define RSSLAB_COMMON_PROCFS_SMAPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

// glibc's HEAP_MAX_SIZE on 64-bit (2 * DEFAULT_MMAP_THRESHOLD_MAX): every
// thread-arena heap is a mapping of this size, aligned to it.
inline constexpr uint64_t kGlibcHeapMaxSize = 64ull << 20;
// The first heap boundary (multiple of kGlibcHeapMaxSize) at or above addr:
// where a heap starts whose rw-p part the kernel merged with a mapping below.
inline constexpr uint64_t GlibcHeapBoundaryAtOrAbove(uint64_t addr) {
  return (addr + kGlibcHeapMaxSize - 1) / kGlibcHeapMaxSize * kGlibcHeapMaxSize;
}

// A ---p mapping directly below an rw-p one counts as a thread-stack guard
// if it is at most this big (glibc's default guard is one page; callers of
// pthread_attr_setguardsize rarely go past a few pages).
inline constexpr uint64_t kMaxGuardSize = 1ull << 20;

// Classifies every mapping of /proc/<pid>/smaps text into exactly one class,
// so the classes' RSS adds up to rss_bytes. In order of precedence:
//   heap    [heap], the brk heap (glibc's main arena).
//   arena   an anonymous rw-p mapping that holds one 64 MiB aligned address
//           and whose contiguous anonymous ---p mappings after it end at the
//           next 64 MiB boundary (or that ends on it itself): glibc reserves
//           each thread-arena heap that way and mprotects it rw as it grows.
//           Its ---p tail belongs to the class too (RSS 0). The kernel merges
//           adjacent rw-p mappings, so one may also hold the top of a thread
//           stack mapped right below the heap (its RSS counted as the
//           arena's); one spanning more than one boundary is not taken for a
//           heap (other allocators reserve large rw-p ranges). arena_count counts
//           heaps: an arena that outgrew one 64 MiB heap counts once per
//           heap, as malloc_info's "subheaps". arena_size_bytes is the rw-p
//           (usable) part, without the tail.
//   stack   [stack], and an anonymous rw-p mapping directly preceded by an
//           anonymous ---p guard of at most kMaxGuardSize (how glibc lays out
//           pthread stacks; verified on a 48-thread python3). The guard
//           itself is counted under anon (RSS 0).
//   special [vdso], [vvar], [vvar_vclock], [vsyscall] and any other
//           bracketed kernel name, and shared memory: shared ('s') mappings of
//           /dev/zero, /SYSV*, /memfd:*, /dev/shm/*, plus [anon_shmem:*].
//   file    any other mapping with a path (private dirty pages of a file
//           mapping stay here although smaps counts them as Anonymous).
//   anon    everything else anonymous: mmap'd malloc chunks, other
//           allocators' segments, guard pages, [anon:name] mappings.
// anon_mappings counts heap + arena + stack + anon mappings; mappings counts
// all. rss_bytes/anon_rss_bytes/swap_bytes sum Rss:, Anonymous:, Swap:.
// detail_top_n > 0 keeps the N largest mappings by RSS in `largest` (kind is
// the class name above). Malformed lines are skipped, never fatal: smaps is
// produced by the kernel and may grow new fields.
void ClassifySmaps(absl::string_view smaps, int detail_top_n,
                   rsslab::v1::MemoryMap* out);
absl::Status ReadSmaps(int pid, int detail_top_n, rsslab::v1::MemoryMap* out);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_SMAPS_H_
