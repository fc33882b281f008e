// mimalloc (2.0.x and 3.x) keeps a page resident while any block on it is live:
// mi_collect(true) returns whole free pages only, so after a burst the free
// blocks around the survivors stay in RSS (measured in docs/PACKAGE.md,
// "What stays under mimalloc": 37 MiB in 16 worker heaps holding 12 MiB of
// live blocks). This returns the 4 KiB pages lying wholly inside a free
// block of the calling thread's heap with madvise(MADV_DONTNEED), as
// glibc's malloc_trim does inside its free chunks. The page holding a free
// block's first word (mimalloc's free-list link) is never touched, so the
// free lists stay intact; the rest of a free block is never read by
// mimalloc, and comes back as zero pages when the block is reused.
//
// Run it on the heap's own thread (a per-thread release pass), after
// mi_collect(true): only the owner changes its pages' free lists, and
// other threads only ever free blocks that are live. Refused (ran = false,
// `note` says why) for anything but the families whose layout was read and
// measured here (MimallocLayout::free_block_purge: 2.0.x and 3.x). Under
// 3.x a page that filled up is abandoned to the arenas (page_full_retain)
// and belongs to no heap until a thread reclaims it: its free blocks are
// out of this walk's reach.
//
// The walk visits every block of the heap, small ones included: tens of
// milliseconds on a busy worker's heap. With min_resident_bytes > 0 it runs
// only when a cheaper look finds that much to return: one call per page
// (no block walk) and mincore() over each page whose blocks are longer than
// an OS page (the only ones the walk can purge), counting its resident
// bytes beyond its live blocks and the first page of each free block. A
// release under steady load, soon after another, then skips the walk
// (skipped = true); one after a burst still makes it.
//
// Example, on each worker:
//   FreeBlockPurge p = PurgeFreeBlocksThisThread(/*min_resident_bytes=*/256 << 10);
//   // p.bytes: what madvise was asked to drop (RSS shows what it did)

#ifndef RSSLAB_MEMORY_ALLOC_FREE_BLOCK_PURGE_H_
#define RSSLAB_MEMORY_ALLOC_FREE_BLOCK_PURGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace alloc {

struct FreeBlockPurge {
  bool ran = false;
  std::string note;      // why it did not run
  int64_t pages = 0;     // mimalloc pages with live blocks visited
  int64_t free_blocks = 0;
  int64_t ranges = 0;    // madvise calls
  int64_t bytes = 0;     // bytes they covered
  int64_t failed = 0;    // madvise calls that failed
  int64_t duration_us = 0;  // the walk and the madvise calls (summed over threads: the longest)
  // The look before the walk (min_resident_bytes > 0): resident bytes it
  // found in free blocks of the walkable pages, and whether that was too
  // little to walk for (summed over threads: how many skipped).
  int64_t resident_free_bytes = 0;
  bool skipped = false;
  int64_t threads_skipped = 0;
};

FreeBlockPurge PurgeFreeBlocksThisThread(int64_t min_resident_bytes = 0);

// Adds one thread's purge to a release's total: the counts summed, `ran` if
// any thread ran it, the note of one that did not, the longest duration.
void AddThreadPurge(const FreeBlockPurge& p, FreeBlockPurge* total);

// The purge as a release's per-worker step (Trimmer::Run's after_release),
// summed over the workers. Held by shared_ptr: a worker past the release's
// timeout may still run its step after the caller has moved on.
//
//   auto total = std::make_shared<PurgeTotal>();
//   trimmer.Run(mode, "manual", timeout, total->Step([] { return int64_t{0}; }));
//   FreeBlockPurge sum = total->Get();
class PurgeTotal : public std::enable_shared_from_this<PurgeTotal> {
 public:
  // `min_resident` gives each worker's threshold (PurgeFreeBlocksThisThread);
  // `on_thread`, if set, also sees each worker's own result on that worker.
  std::function<void()> Step(std::function<int64_t()> min_resident,
                             std::function<void(const FreeBlockPurge&)> on_thread = nullptr);
  FreeBlockPurge Get() const;
  void ToProto(rsslab::v1::FreeBlockPurgeResult* out) const;

 private:
  mutable absl::Mutex mu_;
  FreeBlockPurge total_ ABSL_GUARDED_BY(mu_);
};

// The look alone: resident bytes in the free blocks of the calling
// thread's walkable pages (an estimate from mincore, see above); -1 when
// the heap cannot be visited.
int64_t ResidentFreeBlockBytesThisThread();

}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_FREE_BLOCK_PURGE_H_
