// Page-level helpers for memory an allocator keeps mapped: drop the whole
// OS pages inside a range, count a range's resident bytes, and tell which
// mimalloc block sizes can free a whole page. Shared by the mimalloc
// backends and the free-block purge; nothing here allocates, so it may run
// inside a heap visit.
//
// Example:
//
//   rsslab::alloc::internal::PageDrops drops;
//   rsslab::alloc::internal::DropWholePages(lo, hi, &drops);
//   int64_t still = rsslab::alloc::internal::ResidentBytesIn(lo, hi);
#ifndef RSSLAB_MEMORY_ALLOC_INTERNAL_PAGES_H_
#define RSSLAB_MEMORY_ALLOC_INTERNAL_PAGES_H_

#include <cstddef>
#include <cstdint>

// Types only (mi_heap_area_t).
#include <mimalloc.h>

namespace rsslab {
namespace alloc {
namespace internal {

// What DropWholePages did: madvise calls, the bytes they covered, failures.
struct PageDrops {
  int64_t ranges = 0, bytes = 0, failed = 0;
};

// madvise(MADV_DONTNEED) over the whole OS pages inside [lo, hi) (lo rounded
// up, hi down to the page size); nothing when no whole page fits. For
// memory an allocator keeps mapped but holds nothing in.
void DropWholePages(uintptr_t lo, uintptr_t hi, PageDrops* drops);

// Bytes of the OS pages touching [lo, hi) that are resident now (mincore),
// -1 if mincore refuses the range.
int64_t ResidentBytesIn(uintptr_t lo, uintptr_t hi);

// A mimalloc page area's distance between blocks (full_block_size, padding
// included, when set).
size_t AreaStride(const mi_heap_area_t& area);
// Blocks of `stride` bytes are longer than an OS page, so a free one can
// hold a whole page beyond the one with its free-list link (one of two
// pages or more always does): the only free blocks the free-block purge can
// return (free_block_purge.h).
bool FreeBlocksHoldWholePages(size_t stride);

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_INTERNAL_PAGES_H_
