// The C allocator actually serving malloc in this process, its own figures,
// and its "give free memory back" calls, found at run time so that one binary
// reports on whichever allocator was LD_PRELOADed (glibc, jemalloc, mimalloc,
// gperftools tcmalloc). jemalloc/mimalloc/tcmalloc are never linked: their
// functions are looked up with dlsym(RTLD_DEFAULT, ...).
//
// Allocator is the interface; detection (Get(), first use) picks one backend
// for the process, once: memory/alloc/internal/glibc.cc, jemalloc.cc,
// mimalloc2.cc (2.0.x, 2.1.x), mimalloc3.cc (3.x) or tcmalloc.cc, with
// internal/mimalloc.cc for what both mimalloc families share (and for a
// mimalloc version rsslab has not read). Nothing outside this folder asks
// which allocator it is by name: it asks the backend.
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

#include <cstdint>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "memory/alloc/malloc_info.h"      // ParseMallocInfo, ReadMallocInfo
#include "memory/alloc/mimalloc_layout.h"  // MimallocLayout
#include "memory/alloc/version.h"          // MimallocVersionText
#include "proto/snapshot.pb.h"

// Types only; the functions are found with dlsym.
#include <mimalloc.h>

namespace rsslab {
namespace alloc {

class Allocator {
 public:
  // The allocator of this process, detected once (from /proc/self/maps, then
  // confirmed with dladdr on malloc) on first use.
  static const Allocator& Get();

  virtual ~Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // glibc | jemalloc | mimalloc | tcmalloc: for reports, not for decisions.
  const std::string& name() const { return id_.name; }
  // Path of the mapped library (libc's for glibc).
  const std::string& library() const { return id_.library; }

  // The allocator's own version text: "2.36" (glibc), "5.3.0-0-g..."
  // (jemalloc), "2.0.9" (mimalloc), "gperftools 2.10"; "" when unknown.
  virtual std::string Version() const = 0;

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
  // What detection could not find (dlsym misses) is added to the note.
  void FillStats(rsslab::v1::AllocatorStats* out) const;

  // The allocator's own resident figure as in FillStats, -1 if it has none
  // (glibc, mimalloc 3.x, an unknown mimalloc) or the lookup failed. Cheap
  // enough to call around a trim.
  virtual int64_t ResidentBytes() const { return -1; }

  // Bytes the program has allocated and not freed, where the allocator
  // keeps that counter cheaply (jemalloc stats.allocated after an epoch
  // bump, tcmalloc generic.current_allocated_bytes); -1 otherwise (glibc:
  // mallinfo2 walks every arena under its lock; mimalloc release builds keep
  // no counter). Used by the automatic trim policy several times a second.
  virtual int64_t AllocatedBytes() const { return -1; }

  // Bytes in use by a walk of the allocator's own structures, where one
  // exists and is short (glibc: mallinfo2, a walk of every arena under its
  // lock); -1 otherwise. For a caller that samples rarely enough to afford
  // it where AllocatedBytes() has no counter.
  virtual int64_t InUseBytesByWalk() const { return -1; }

  // Whether a trim's per-thread pass should also run the free-block purge
  // (free_block_purge.h) for this allocator family: mimalloc, whose pages
  // stay resident with any live block. The purge itself says why when the
  // loaded version's layout was not read.
  virtual bool KeepsPagesWithLiveBlocks() const { return false; }

  // Whether mallopt(M_ARENA_MAX) caps this allocator's arenas (glibc), and
  // otherwise how its arena count is set, for a refusal message.
  virtual bool ArenaCapApplies() const { return false; }
  virtual std::string ArenaCountHint() const {
    return "that allocator has no glibc-style arenas";
  }

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
  virtual Release ReleaseGlobal() const = 0;

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
  //            on 3.x then the page tails ("mi_collect(true)+madvise(page
  //            tails)", ret -1 if a madvise failed; internal/mimalloc3.cc)
  //   tcmalloc MallocExtension_MarkThreadIdle() (returns the thread cache
  //            to the central lists)
  virtual Release ReleaseThisThread() const { return {"none", 0}; }

  // Run once, on the trimming thread, after ReleaseThisThread() ran on every
  // worker: returns what the flushed caches gave back to shared structures.
  //   jemalloc mallctl("arena.4096.purge") (all arenas, dirty and muzzy)
  //   tcmalloc MallocExtension_ReleaseFreeMemory()
  //   glibc, mimalloc: nothing ("none"; mimalloc's release is per heap)
  // Doing this once instead of on every worker keeps the pause per worker
  // to the flush alone (64 arena purges at 64 workers cost each worker up
  // to 18 ms; docs/TRIM.md).
  virtual Release ReleaseAfterThreads() const { return {"none", 0}; }

  // Some allocators return what a thread release freed only when the thread
  // comes back later: mimalloc 2.x schedules the decommit of the spans
  // that mi_collect freed and carries it out only when the owning thread
  // next allocates a page in that segment; an idle worker never does
  // (internal/mimalloc2.cc). FollowUpDelay() > 0 asks the trimmer to wait
  // that long after the per-thread pass and then run FollowUpThisThread()
  // on every worker. Zero (nothing to do) for the other allocators, and for
  // mimalloc with the delay 0 (already decommitted at free). While a trim
  // holds the delay at 0 (OverrideReleaseDelay, below) the trimmer runs
  // the visit without a wait. HasFollowUp() is true for mimalloc 2.x only:
  // 3.x keeps no per-thread segments.
  virtual absl::Duration FollowUpDelay() const { return absl::ZeroDuration(); }
  virtual bool HasFollowUp() const { return false; }
  virtual Release FollowUpThisThread() const { return {"none", 0}; }

  // A release deferred by a timer, made immediate for the length of one trim.
  // mimalloc is the only allocator here whose trim calls leave memory
  // behind because of a timer (decommit_delay on 2.0.x, purge_delay on
  // 2.1.2+ and 3.x; internal/mimalloc.cc). The others need nothing:
  // jemalloc's arena.<all>.purge purges dirty and muzzy extents whatever
  // dirty/muzzy_decay_ms say; tcmalloc's ReleaseFreeMemory releases every
  // free page-heap span whatever TCMALLOC_RELEASE_RATE says; glibc has no
  // timer.
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
  virtual DelayOverride OverrideReleaseDelay() const { return {}; }
  // Puts back `o.before` if `o.applied`; returns the value read back after.
  virtual int64_t RestoreReleaseDelay(const DelayOverride& o) const { return 0; }
  // Run on the trimming thread after RestoreReleaseDelay: mimalloc 3.x
  // mi_collect(true) when the delay was overridden (what was scheduled
  // before the trim is purged only at a non-zero delay); "none" (call
  // empty) otherwise.
  virtual Release ReleaseAfterRestore(const DelayOverride& o) const { return {"", 0}; }

  // The allocator's figures for the calling thread (see ThreadAllocStats in
  // proto/snapshot.proto): mimalloc's heap areas, jemalloc's thread arena.
  // Fields the allocator cannot give are -1 (glibc and tcmalloc have no
  // per-thread figures). Costs an epoch refresh on jemalloc.
  void FillThreadStats(rsslab::v1::ThreadAllocStats* out) const;

  // The loaded mimalloc's layout (mi_version's family); null when the
  // allocator is not mimalloc or its version was not read.
  virtual const MimallocLayout* mimalloc_layout() const { return nullptr; }
  // mi_heap_visit_blocks over the calling thread's default heap; false
  // (nothing visited) when the allocator is not mimalloc or lacks either
  // function. `visit` must not allocate: the heap walked is malloc's.
  virtual bool VisitThisThreadHeap(bool all_blocks, mi_block_visit_fun* visit,
                                   void* arg) const {
    return false;
  }

  // What detection found, handed to the backend it picks.
  struct Identity {
    std::string name;
    std::string library;
    std::string missing;  // what failed on the way, reported in the stats' note
  };

 protected:
  explicit Allocator(Identity id) : id_(std::move(id)) {}

  // The backend's part of FillStats / FillThreadStats (the latter starts
  // from every field at -1).
  virtual void FillOwnStats(rsslab::v1::AllocatorStats* out) const = 0;
  virtual void FillOwnThreadStats(rsslab::v1::ThreadAllocStats* out) const {}
  // Adds dlsym misses (a comma-separated list of symbols) to the note.
  void NoteUnresolved(const std::string& unresolved);

 private:
  Identity id_;
};

}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_ALLOC_H_
