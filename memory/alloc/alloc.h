// The C allocator actually serving malloc in this process, its own figures,
// and its "give free memory back" calls, found at run time so that one binary
// reports on whichever allocator was LD_PRELOADed (glibc, jemalloc, mimalloc,
// gperftools tcmalloc). jemalloc/mimalloc/tcmalloc are never linked: their
// functions are looked up with dlsym(RTLD_DEFAULT, ...).
//
// Example:
//
//   const rsslab::alloc::Allocator& a = rsslab::alloc::Allocator::Get();
//   rsslab::v1::AllocatorStats stats;
//   a.FillStats(&stats);                 // a.name() == "jemalloc", ...
//   int64_t before = a.ResidentBytes();  // -1 on glibc (see below)
//   rsslab::alloc::Allocator::Release r = a.ReleaseGlobal();
//   // r.call == "mallctl(arena.4096.purge)", r.ret == 0
//   // ...and on each worker thread, for thread-local heaps/caches:
//   a.ReleaseThisThread();
//
// All methods are thread-safe. FillStats/ResidentBytes allocate almost
// nothing (glibc's malloc_info XML goes to an mmap'd buffer, not the heap).
#ifndef RSSLAB_MEMORY_ALLOC_ALLOC_H_
#define RSSLAB_MEMORY_ALLOC_ALLOC_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "memory/alloc/version.h"  // MimallocVersionText
#include "proto/snapshot.pb.h"

// Types only; the functions are found with dlsym.
#include <mimalloc.h>

namespace rsslab {
namespace alloc {

struct MimallocLayout;  // below

// What DropWholePages did: madvise calls, the bytes they covered, failures.
struct PageDrops {
  int64_t ranges = 0, bytes = 0, failed = 0;
};

class Allocator {
 public:
  // The allocator of this process, detected once (from /proc/self/maps, then
  // confirmed with dladdr on malloc) on first use.
  static const Allocator& Get();

  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // glibc | jemalloc | mimalloc | tcmalloc
  const std::string& name() const { return name_; }
  // Path of the mapped library (libc's for glibc).
  const std::string& library() const { return library_; }

  // Summary (allocated_bytes, resident_bytes, note) plus the message of the
  // loaded allocator:
  //   glibc    mallinfo2() and malloc_info() per arena. resident_bytes = 0:
  //            glibc has no resident figure (malloc_trim returns pages with
  //            MADV_DONTNEED inside arenas without changing "system" bytes),
  //            so use RSS. allocated_bytes = uordblks + hblkhd.
  //   jemalloc mallctl after an "epoch" refresh; resident = stats.resident.
  //   mimalloc mi_version, then per its family (MimallocLayoutFor: 2.0.x,
  //            2.1.x, 3.x) mi_process_info and every option of that
  //            version's enum read back with mi_option_get. resident =
  //            current_commit on 2.x (mimalloc's own current_rss is the same
  //            commit estimate on Linux); 3.x's counter is refused (0, see
  //            MimallocLayout); allocated_bytes = 0 (release builds keep no
  //            such counter). A version whose layout rsslab has not read
  //            gets no options and no byte figures, and `refused` says so,
  //            naming the version: an index from another version's enum
  //            reads another option.
  //   tcmalloc MallocExtension_GetNumericProperty; resident = heap_size -
  //            pageheap_unmapped_bytes; release_rate via
  //            MallocExtension::instance()->GetMemoryReleaseRate().
  void FillStats(rsslab::v1::AllocatorStats* out) const;

  // The allocator's own resident figure as in FillStats, -1 if it has none
  // (glibc, mimalloc 3.x, an unknown mimalloc) or the lookup failed. Cheap enough to call around a trim.
  int64_t ResidentBytes() const;

  // Bytes the program has allocated and not freed, where the allocator
  // keeps that counter cheaply (jemalloc stats.allocated after an epoch
  // bump, tcmalloc generic.current_allocated_bytes); -1 otherwise (glibc:
  // mallinfo2 walks every arena under its lock; mimalloc release builds keep
  // no counter). Used by the automatic trim policy several times a second.
  int64_t AllocatedBytes() const;

  // Bytes in use by a walk of the allocator's own structures, where one
  // exists and is short (glibc: mallinfo2, a walk of every arena under its
  // lock); -1 otherwise. For a caller that samples rarely enough to afford
  // it where AllocatedBytes() has no counter.
  int64_t InUseBytesByWalk() const;

  // Whether a trim's per-thread pass should also run the free-block purge
  // (free_block_purge.h) for this allocator family: mimalloc, whose pages
  // stay resident with any live block. The purge itself says why when the
  // loaded version's layout was not read.
  bool KeepsPagesWithLiveBlocks() const;

  struct Release {
    std::string call;  // what ran, e.g. "malloc_trim(0)"; "none" if nothing
    int ret = 0;       // its return value (malloc_trim: 1 = memory released)
  };

  // Gives free memory back to the OS, process-wide as far as the allocator
  // can from the calling thread:
  //   glibc    malloc_trim(0) (walks every arena)
  //   jemalloc mallctl("arena.4096.purge") (MALLCTL_ARENAS_ALL), then epoch
  //   mimalloc mi_collect(true) (only the calling thread's heap + abandoned
  //            segments: see ReleaseThisThread)
  //   tcmalloc MallocExtension_ReleaseFreeMemory()
  Release ReleaseGlobal() const;

  // Run ON each worker thread: releases what only that thread can. Cheap
  // on purpose (a worker serves nothing meanwhile); anything process-wide
  // is left to ReleaseAfterThreads(), run once after the pass.
  //   glibc    nothing ("none"): malloc_trim(0) already walks every arena,
  //            and glibc's per-thread tcache (at most 7 chunks <= 1 KiB per
  //            size) has no flush call; running malloc_trim on every worker
  //            would just take every arena lock N times.
  //   jemalloc mallctl("thread.tcache.flush"): the thread's cached objects
  //            go back to their arenas' slabs (purged after the pass)
  //   mimalloc mi_collect(true), which acts on the calling thread's heap;
  //            on 3.x then PurgePageTails ("mi_collect(true)+madvise(page
  //            tails)", ret -1 if a madvise failed)
  //   tcmalloc MallocExtension_MarkThreadIdle() (returns the thread cache
  //            to the central lists)
  Release ReleaseThisThread() const;

  // Run once, on the trimming thread, after ReleaseThisThread() ran on every
  // worker: returns what the flushed caches gave back to shared structures.
  //   jemalloc mallctl("arena.4096.purge") (all arenas, dirty and muzzy)
  //   tcmalloc MallocExtension_ReleaseFreeMemory()
  //   glibc, mimalloc: nothing ("none"; mimalloc's release is per heap)
  // Doing this once instead of on every worker keeps the pause per worker
  // to the flush alone (64 arena purges at 64 workers cost each worker up
  // to 18 ms; docs/TRIM.md).
  Release ReleaseAfterThreads() const;

  // Some allocators return what a thread release freed only when the thread
  // comes back later: mimalloc 2.0.x schedules the decommit of the spans
  // that mi_collect freed (decommit_delay, 25 ms by default) and carries it
  // out only when the owning thread next allocates a page in that segment
  // (segment.c: mi_segments_page_alloc -> mi_segment_delayed_decommit); an
  // idle worker never does. FollowUpDelay() > 0 asks the trimmer to wait
  // that long after the per-thread pass and then run FollowUpThisThread()
  // on every worker: for mimalloc one large (page-sized) mi_malloc + mi_free,
  // which makes the thread allocate a page and so decommit its segment's
  // expired spans. Zero (nothing to do) for the other allocators, and for
  // mimalloc with decommit_delay 0 (already decommitted at free). While a
  // trim holds the delay at 0 (OverrideReleaseDelay, below) the trimmer runs
  // the visit without a wait: the large free then decommits the span it
  // coalesces with at once, spans scheduled before the trim included.
  // mimalloc 3.x keeps no per-thread segments (freed pages go back to the
  // process-wide arenas, and a forced collect purges every arena), so it
  // needs no second visit: HasFollowUp() is false there and for the other
  // allocators, true for mimalloc 2.x.
  absl::Duration FollowUpDelay() const;
  bool HasFollowUp() const;
  Release FollowUpThisThread() const;

  // A release deferred by a timer, made immediate for the length of one trim.
  // mimalloc 2.0.x is the only allocator here whose trim calls leave memory
  // behind because of a timer: a span freed with decommit_delay > 0 is only
  // scheduled, and the owning thread decommits it later, if ever (above).
  // With the delay 0 a freed span is decommitted at once, together with the
  // free spans it coalesces with, so the second visit's one large free
  // returns a worker's scheduled spans (docs/TRIM.md). The others need
  // nothing: jemalloc's arena.<all>.purge purges dirty and muzzy extents
  // whatever dirty/muzzy_decay_ms say (and so whatever a background thread
  // would have done later); tcmalloc's ReleaseFreeMemory releases every free
  // page-heap span whatever TCMALLOC_RELEASE_RATE says; glibc has no timer.
  //
  // The option is the loaded version's: decommit_delay on 2.0.x (and 2.1.0,
  // 2.1.1, which kept 2.0.9's enum), purge_delay on 2.1.2+ and 3.x. mimalloc
  // 3.x schedules purges per arena, process-wide; its mi_collect(true)
  // forces them, except while the delay is 0 (mi_arenas_try_purge returns at
  // once: "nothing will be scheduled"), so what was scheduled before the trim
  // is purged by ReleaseAfterRestore() once the delay is back.
  struct DelayOverride {
    std::string option;    // e.g. "mimalloc decommit_delay"; empty: none applies
    bool applied = false;  // the option was changed (and must be restored)
    int64_t before = 0;    // value read back before the trim
    int64_t during = 0;    // value read back after setting it
  };
  // Sets the delay to 0 if it is > 0 (mi_option_set, read back with
  // mi_option_get). Process-wide: requests served meanwhile free with
  // immediate decommit too. Allocators without such an option, or mimalloc
  // already at 0 (mimalloc-purge0), are left alone (applied = false).
  DelayOverride OverrideReleaseDelay() const;
  // Puts back `o.before` if `o.applied`; returns the value read back after.
  int64_t RestoreReleaseDelay(const DelayOverride& o) const;
  // Run on the trimming thread after RestoreReleaseDelay: mimalloc 3.x
  // mi_collect(true) when the delay was overridden (above); "none" (call
  // empty) otherwise.
  Release ReleaseAfterRestore(const DelayOverride& o) const;

  // The allocator's figures for the calling thread (see ThreadAllocStats in
  // proto/snapshot.proto): mimalloc's heap areas, jemalloc's thread arena.
  // Fields the allocator cannot give are -1 (glibc and tcmalloc have no
  // per-thread figures). Costs an epoch refresh on jemalloc.
  void FillThreadStats(rsslab::v1::ThreadAllocStats* out) const;

  // The loaded mimalloc's layout (mi_version's family); null when the
  // allocator is not mimalloc or its version was not read.
  const MimallocLayout* mimalloc_layout() const { return mi_layout_; }
  // mi_heap_visit_blocks over the calling thread's default heap; false
  // (nothing visited) when the allocator is not mimalloc or lacks either
  // function. `visit` must not allocate: the heap walked is malloc's.
  bool VisitThisThreadHeap(bool all_blocks, mi_block_visit_fun* visit, void* arg) const;

 private:
  Allocator();

  void FillGlibc(rsslab::v1::AllocatorStats* out) const;
  void FillJemalloc(rsslab::v1::AllocatorStats* out) const;
  void FillMimalloc(rsslab::v1::AllocatorStats* out) const;
  void FillTcmalloc(rsslab::v1::AllocatorStats* out) const;
  // The option of the loaded mimalloc that delays decommit/purge, its
  // extension, and their mi_option_t values; -1 when unknown.
  int MimallocDelayOption() const;
  int MimallocExtendOption() const;
  int JemallocPurge() const;
  // mimalloc 3.x, on the heap's own thread after mi_collect(true): drops
  // (madvise MADV_DONTNEED) the part of each live page past its capacity,
  // which the page has never used. 3.x carves pages from arena slices that
  // a freed page left committed and resident until its purge_delay expired;
  // a new page there extends its capacity in small steps, so the rest of
  // the slice range keeps the old page's contents resident for as long as
  // the page lives, and no collect or arena purge touches a live page.
  // Measured at 64 workers (docs/TRIM.md): 40 MiB resident in such tails
  // after the collect with the defaults, none with purge_delay 0. Safe on
  // the owner thread: only the owner extends a page's capacity (and writes
  // the new blocks' free list then), other threads only free live blocks,
  // and zero pages are what mimalloc would find in fresh memory.
  struct PageTails {
    int64_t pages = 0;
    PageDrops drops;
  };
  PageTails PurgePageTails() const;
  void JemallocEpoch() const;

  std::string name_;
  std::string library_;
  std::string missing_;  // dlsym failures, reported in AllocatorStats.note

  // jemalloc
  int (*mallctl_)(const char*, void*, size_t*, void*, size_t) = nullptr;
  // mimalloc
  void (*mi_process_info_)(size_t*, size_t*, size_t*, size_t*, size_t*,
                           size_t*, size_t*, size_t*) = nullptr;
  int (*mi_version_)() = nullptr;
  // mimalloc's own signature: long mi_option_get(mi_option_t).
  long (*mi_option_get_)(int) = nullptr;  // NOLINT(runtime/int)
  void (*mi_option_set_)(int, long) = nullptr;  // NOLINT(runtime/int)
  void (*mi_collect_)(bool) = nullptr;
  mi_heap_t* (*mi_heap_get_default_)() = nullptr;
  void* (*mi_malloc_)(size_t) = nullptr;
  void (*mi_free_)(void*) = nullptr;
  bool (*mi_heap_visit_blocks_)(const mi_heap_t*, bool, mi_block_visit_fun*, void*) = nullptr;
  int mi_version_number_ = 0;  // mi_version(), read once
  const MimallocLayout* mi_layout_ = nullptr;  // null: version not read
  // tcmalloc (gperftools' C API)
  int (*tc_get_numeric_)(const char*, size_t*) = nullptr;
  void (*tc_release_free_)() = nullptr;
  void (*tc_mark_idle_)() = nullptr;
  void* (*tc_instance_)() = nullptr;  // MallocExtension::instance()
  // gperftools' tc_version(int* major, int* minor, const char** patch).
  const char* (*tc_version_)(int*, int*, const char**) = nullptr;
};

// What rsslab knows of one mimalloc version family, read from that version's
// own include/mimalloc.h, src/options.c, src/stats.c and prim/unix/prim.c
// (tags v2.0.9, v2.1.0-v2.1.9, v3.0.0-alpha/v3.0.1; docs/TRIM.md):
//   2.0.x  mi_version 209-211 (2.0.9's enum; 2.1.0 and 2.1.1 kept it):
//          decommit_delay (MIMALLOC_DECOMMIT_DELAY; RESET_DELAY is its old
//          alias; MIMALLOC_PURGE_DELAY is silently ignored), per-thread
//          segments whose freed spans wait for their owner.
//   2.1.x  mi_version 212-219: purge_delay (MIMALLOC_PURGE_DELAY; DECOMMIT_
//          names are legacy aliases), segments as in 2.0.x. Indices past 28
//          differ between 2.1.7 and 2.1.7a (both say 217) and are not read.
//   3.x    mi_version 300-301: purge_delay (default 2500 ms), no segments:
//          pages come from process-wide arenas. Its committed counter is
//          not interpreted: a purge of a range that was committed on demand
//          subtracts what was never added (arena.c mi_arena_purge, whose
//          adjustments are commented out), so it drifts down and goes
//          negative (measured here: after fill + shrink with purge_delay 0;
//          -6.6 GiB at 64 threads with the defaults).
// mi_process_info has the same signature in all three; on Linux
// current_rss = current_commit (mimalloc's committed counter), peak_rss =
// getrusage's ru_maxrss (= VmHWM), page_faults = major faults.
struct MimallocOption {
  const char* name;  // as in MIMALLOC_<NAME>, lower case
  int index;         // its mi_option_t value in this family
  int min_version;   // mi_version range of the family it holds for
  int max_version;
};
struct MimallocLayout {
  const char* family;          // "2.0.x" | "2.1.x" | "3.x"
  int min_version, max_version;
  const char* delay_option;    // decommit_delay | purge_delay
  const char* extend_option;   // decommit_extend_delay | purge_extend_delay
  bool thread_segments;        // 2.x: the second visit applies
  bool commit_counter;         // current/peak_commit (and current_rss) mean committed bytes
  // Free blocks are linked through their first word and nothing else of a
  // free block is read (read from the tag's page.c, free.c and heap.c), so
  // the free-block purge may drop their other pages (free_block_purge.h).
  bool free_block_purge;
  std::vector<MimallocOption> options;
};
// The family for a mi_version() value; nullptr if rsslab has not read it.
const MimallocLayout* MimallocLayoutFor(int version);
// Option name -> mi_option_t for `version`; empty if its layout is unknown.
std::map<std::string, int> MimallocOptionIds(int version);

// madvise(MADV_DONTNEED) over the whole OS pages inside [lo, hi) (lo rounded
// up, hi down to the page size); nothing when no whole page fits. For
// memory an allocator keeps mapped but holds nothing in (allocates nothing).
void DropWholePages(uintptr_t lo, uintptr_t hi, PageDrops* drops);

// Bytes of the OS pages touching [lo, hi) that are resident now (mincore),
// -1 if mincore refuses the range. Allocates nothing, so it may run inside a
// heap visit.
int64_t ResidentBytesIn(uintptr_t lo, uintptr_t hi);

// A mimalloc page area's distance between blocks (full_block_size, padding
// included, when set).
size_t AreaStride(const mi_heap_area_t& area);
// Blocks of `stride` bytes are longer than an OS page, so a free one can
// hold a whole page beyond the one with its free-list link (one of two
// pages or more always does): the only free blocks the free-block purge can
// return (free_block_purge.h).
bool FreeBlocksHoldWholePages(size_t stride);

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

#endif  // RSSLAB_MEMORY_ALLOC_ALLOC_H_
