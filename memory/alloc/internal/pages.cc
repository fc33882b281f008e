#include "memory/alloc/internal/pages.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace rsslab {
namespace alloc {
namespace internal {

void DropWholePages(uintptr_t lo, uintptr_t hi, PageDrops* drops) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  lo = (lo + page - 1) & ~(page - 1);
  hi &= ~(page - 1);
  if (hi <= lo) return;
  ++drops->ranges;
  drops->bytes += static_cast<int64_t>(hi - lo);
  if (madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) ++drops->failed;
}

int64_t ResidentBytesIn(uintptr_t lo, uintptr_t hi) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  lo &= ~(page - 1);
  // Fixed: nothing may allocate during a heap visit; longer ranges are read
  // in pieces (2.0.x pages are at most 512 KiB: 128 entries).
  unsigned char vec[256];
  int64_t pages = 0;
  for (uintptr_t a = lo; a < hi; a += sizeof(vec) * page) {
    const size_t len = std::min<uintptr_t>(hi - a, sizeof(vec) * page);
    if (mincore(reinterpret_cast<void*>(a), len, vec) != 0) return -1;
    const size_t n = (len + page - 1) / page;
    for (size_t i = 0; i < n; ++i) pages += vec[i] & 1;
  }
  return pages * static_cast<int64_t>(page);
}

size_t AreaStride(const mi_heap_area_t& area) {
  return area.full_block_size != 0 ? area.full_block_size : area.block_size;
}

bool FreeBlocksHoldWholePages(size_t stride) {
  // A free block keeps the OS page with its first word (the free-list
  // link); one longer than a page can still cover a whole page past it
  // (a 5 KiB block one time in four, 7 KiB three times in four).
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return stride > page;
}

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
