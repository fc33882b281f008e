// mimalloc 3.x: no per-thread segments (freed pages go back to the
// process-wide arenas, and a forced collect purges every arena), so no
// second visit; instead the page tails on each worker, and one collect after
// the release delay is restored.
//
// 3.x schedules purges per arena, process-wide; its mi_collect(true) forces
// them, except while the delay is 0 (mi_arenas_try_purge returns at once:
// "nothing will be scheduled"), so what was scheduled before the trim is
// purged by ReleaseAfterRestore() once the delay is back.
#include <memory>
#include <string>
#include <utility>

#include "memory/alloc/internal/mimalloc.h"
#include "memory/alloc/internal/pages.h"

namespace rsslab {
namespace alloc {
namespace internal {

class Mimalloc3 final : public Mimalloc {
 public:
  using Mimalloc::Mimalloc;

  Release ReleaseThisThread() const override {
    Release r = Collect();
    if (r.ret != 0 || api().heap_get_default == nullptr ||
        api().heap_visit_blocks == nullptr) {
      return r;
    }
    const PageTails t = PurgePageTails();
    return {"mi_collect(true)+madvise(page tails)", t.drops.failed == 0 ? 0 : -1};
  }

  Release ReleaseAfterRestore(const DelayOverride& o) const override {
    // The arenas' scheduled purges (from before the trim, and from requests
    // served while it ran) are forced only by a collect at a non-zero delay;
    // mi_collect(true) purges every arena, whichever thread.
    if (!o.applied || api().collect == nullptr) return {"", 0};
    return Collect();
  }

 private:
  struct PageTails {
    int64_t pages = 0;
    PageDrops drops;
  };

  // On the heap's own thread after mi_collect(true): drops (madvise
  // MADV_DONTNEED) the part of each live page past its capacity, which the
  // page has never used. 3.x carves pages from arena slices that a freed
  // page left committed and resident until its purge_delay expired; a new
  // page there extends its capacity in small steps, so the rest of the slice
  // range keeps the old page's contents resident for as long as the page
  // lives, and no collect or arena purge touches a live page. Measured at
  // 64 workers (docs/TRIM.md): 40 MiB resident in such tails after the
  // collect with the defaults, none with purge_delay 0. Safe on the owner
  // thread: only the owner extends a page's capacity (and writes the new
  // blocks' free list then), other threads only free live blocks, and zero
  // pages are what mimalloc would find in fresh memory.
  PageTails PurgePageTails() const {
    PageTails tails;
    // Areas only (visit_all_blocks=false): one call per page.
    VisitThisThreadHeap(
        false,
        [](const mi_heap_t*, const mi_heap_area_t* area, void* block, size_t, void* arg) {
          if (block != nullptr || area == nullptr || area->blocks == nullptr) return true;
          auto* t = static_cast<PageTails*>(arg);
          ++t->pages;
          // committed = capacity * block size (the blocks the page has ever
          // handed out or put on a free list); reserved = what fits in it.
          const uintptr_t base = reinterpret_cast<uintptr_t>(area->blocks);
          DropWholePages(base + area->committed, base + area->reserved, &t->drops);
          return true;
        },
        &tails);
    return tails;
  }
};

std::unique_ptr<Allocator> NewMimalloc3(MimallocFound f) { return std::make_unique<Mimalloc3>(std::move(f)); }

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
