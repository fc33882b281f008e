#include "memory/alloc/free_block_purge.h"

#include <mimalloc.h>
#include <unistd.h>

#include <array>
#include <chrono>

#include "memory/alloc/alloc.h"

namespace rsslab {
namespace alloc {
namespace {

struct Walk {
  uintptr_t page_size = 4096;
  // The area being visited: its blocks, stride and capacity, and the live
  // blocks seen so far (visited in address order).
  uintptr_t start = 0;
  size_t stride = 0;
  size_t capacity = 0;
  // Fixed, not a vector: nothing may allocate while mimalloc walks the
  // heap it would allocate from. Pages with blocks of 2 pages or more hold
  // at most 64 (2.0.x medium pages are 512 KiB); an area with more live
  // blocks than fit is skipped, never guessed at.
  std::array<uintptr_t, 1024> live{};
  size_t n_live = 0;
  bool skip = true;
  FreeBlockPurge* out = nullptr;

  PageDrops drops;

  // The area's free blocks are its slots that were not visited as live.
  void Finish() {
    if (skip || capacity == 0) {
      n_live = 0;
      return;
    }
    ++out->pages;
    size_t next_live = 0;
    for (size_t i = 0; i < capacity; ++i) {
      const uintptr_t b = start + i * stride;
      while (next_live < n_live && live[next_live] < b) ++next_live;
      if (next_live < n_live && live[next_live] == b) continue;
      ++out->free_blocks;
      // Keep the page with the block's first word (its free-list link):
      // so two free blocks' ranges never touch, one madvise each.
      DropWholePages(b + sizeof(void*), b + stride, &drops);
    }
    n_live = 0;
  }
};

bool Visit(const mi_heap_t*, const mi_heap_area_t* area, void* block, size_t, void* arg) {
  Walk* w = static_cast<Walk*>(arg);
  if (block == nullptr) {  // a new area (page): the previous one is complete
    w->Finish();
    w->start = reinterpret_cast<uintptr_t>(area->blocks);
    w->stride = area->full_block_size != 0 ? area->full_block_size : area->block_size;
    w->capacity = w->stride == 0 ? 0 : area->committed / w->stride;
    // Blocks under two pages cannot hold a whole page beyond their first.
    w->skip = w->stride < 2 * w->page_size;
    return true;
  }
  if (w->skip) return true;
  if (w->n_live == w->live.size()) {
    w->skip = true;
    return true;
  }
  w->live[w->n_live++] = reinterpret_cast<uintptr_t>(block);
  return true;
}

}  // namespace

FreeBlockPurge PurgeFreeBlocksThisThread() {
  FreeBlockPurge r;
  const Allocator& a = Allocator::Get();
  if (a.name() != "mimalloc") {
    r.note = "not mimalloc";
    return r;
  }
  const MimallocLayout* layout = a.mimalloc_layout();
  // 2.0.x only: the free-list layout this relies on was read from 2.0.9;
  // other versions are left to their own collect.
  if (layout == nullptr || std::string(layout->family) != "2.0.x") {
    r.note = "mimalloc version not 2.0.x";
    return r;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Walk w;
  w.page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  w.out = &r;
  if (!a.VisitThisThreadHeap(/*all_blocks=*/true, &Visit, &w)) {
    r.note = "mi_heap_visit_blocks or mi_heap_get_default not found";
    return r;
  }
  w.Finish();
  r.ranges = w.drops.ranges;
  r.bytes = w.drops.bytes;
  r.failed = w.drops.failed;
  r.ran = true;
  r.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace alloc
}  // namespace rsslab
