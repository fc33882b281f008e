#include "memory/alloc/free_block_purge.h"

#include <mimalloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string>
#include <utility>

#include "memory/alloc/alloc.h"
#include "memory/alloc/internal/pages.h"

namespace rsslab {
namespace alloc {
namespace {

using internal::AreaStride;
using internal::DropWholePages;
using internal::FreeBlocksHoldWholePages;
using internal::PageDrops;
using internal::ResidentBytesIn;

struct Walk {
  uintptr_t page_size = 4096;
  // The area being visited: its blocks, stride and capacity, and the live
  // blocks seen so far (visited in address order).
  uintptr_t start = 0;
  size_t stride = 0;
  size_t capacity = 0;
  // Fixed, not a vector: nothing may allocate while mimalloc walks the
  // heap it would allocate from. Pages with blocks longer than an OS page
  // hold at most 127 (3.x's 512 KiB medium pages of 4 KiB + 1 blocks; 2.0.x
  // keeps blocks up to 16 KiB in 64 KiB pages); an area with more live
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
    w->stride = AreaStride(*area);
    w->capacity = w->stride == 0 ? 0 : area->committed / w->stride;
    w->skip = !FreeBlocksHoldWholePages(w->stride);
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

// The pages a walk can purge: blocks longer than an OS page, with a free
// slot; capacity 1 (a large block's own page) has none while it is live.
struct Look {
  uintptr_t page_size = 4096;
  int64_t resident_free = 0;

  void Area(const mi_heap_area_t* area) {
    const size_t stride = AreaStride(*area);
    if (area->blocks == nullptr || !FreeBlocksHoldWholePages(stride)) return;
    const size_t capacity = area->committed / stride;
    if (capacity <= 1 || area->used >= capacity) return;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(area->blocks);
    const int64_t resident_bytes = ResidentBytesIn(lo, lo + area->committed);
    if (resident_bytes < 0) return;
    // Live blocks are taken as resident, and each free block keeps the page
    // with its free-list link: what is left is what the walk could drop.
    const int64_t kept = static_cast<int64_t>(area->used * stride + (capacity - area->used) * page_size);
    resident_free += std::max<int64_t>(0, resident_bytes - kept);
  }
};

bool LookAtArea(const mi_heap_t*, const mi_heap_area_t* area, void* block, size_t, void* arg) {
  if (block == nullptr && area != nullptr) static_cast<Look*>(arg)->Area(area);
  return true;
}

const char* Refusal() {
  const Allocator& a = Allocator::Get();
  if (!a.KeepsPagesWithLiveBlocks()) return "not mimalloc";
  const MimallocLayout* layout = a.mimalloc_layout();
  // The families whose free-list layout was read and measured here (2.0.9,
  // 3.0.1); others are left to their own collect.
  if (layout == nullptr || !layout->free_block_purge) {
    return "mimalloc version not 2.0.x or 3.x";
  }
  return nullptr;
}

}  // namespace

int64_t ResidentFreeBlockBytesThisThread() {
  if (Refusal() != nullptr) return -1;
  Look look;
  look.page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  if (!Allocator::Get().VisitThisThreadHeap(/*all_blocks=*/false, &LookAtArea, &look)) return -1;
  return look.resident_free;
}

FreeBlockPurge PurgeFreeBlocksThisThread(int64_t min_resident_bytes) {
  FreeBlockPurge r;
  if (const char* why = Refusal()) {
    r.note = why;
    return r;
  }
  const Allocator& a = Allocator::Get();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed_us = [&t0] {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now() - t0).count();
  };
  if (min_resident_bytes > 0) {
    r.resident_free_bytes = ResidentFreeBlockBytesThisThread();
    if (r.resident_free_bytes >= 0 && r.resident_free_bytes < min_resident_bytes) {
      r.ran = true;
      r.skipped = true;
      r.threads_skipped = 1;
      r.duration_us = elapsed_us();
      return r;
    }
  }
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
  r.duration_us = elapsed_us();
  return r;
}

void AddThreadPurge(const FreeBlockPurge& p, FreeBlockPurge* t) {
  t->ran = t->ran || p.ran;
  if (!p.ran) t->note = p.note;
  t->pages += p.pages;
  t->free_blocks += p.free_blocks;
  t->ranges += p.ranges;
  t->bytes += p.bytes;
  t->failed += p.failed;
  t->resident_free_bytes += p.resident_free_bytes;
  t->threads_skipped += p.threads_skipped;
  t->duration_us = std::max(t->duration_us, p.duration_us);
}

std::function<void()> PurgeTotal::Step(std::function<int64_t()> min_resident,
                                       std::function<void(const FreeBlockPurge&)> on_thread) {
  std::shared_ptr<PurgeTotal> self = shared_from_this();
  return [self, min_resident = std::move(min_resident), on_thread = std::move(on_thread)] {
    const FreeBlockPurge p = PurgeFreeBlocksThisThread(min_resident());
    if (on_thread) on_thread(p);
    absl::MutexLock l(&self->mu_);
    AddThreadPurge(p, &self->total_);
  };
}

FreeBlockPurge PurgeTotal::Get() const {
  absl::MutexLock l(&mu_);
  return total_;
}

void PurgeTotal::ToProto(rsslab::v1::FreeBlockPurgeResult* out) const {
  const FreeBlockPurge t = Get();
  out->set_ran(t.ran);
  out->set_note(t.note);
  out->set_pages(t.pages);
  out->set_free_blocks(t.free_blocks);
  out->set_ranges(t.ranges);
  out->set_bytes(t.bytes);
  out->set_failed(t.failed);
  out->set_longest_us(t.duration_us);
}

}  // namespace alloc
}  // namespace rsslab
