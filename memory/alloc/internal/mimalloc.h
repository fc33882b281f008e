// What the mimalloc backends share: the dlsym'd API, mi_process_info and
// the options read per the loaded version's layout (mimalloc_layout.h),
// mi_collect, heap visits, and the release-delay override. Used as is for a
// mimalloc version rsslab has not read (no options, no byte figures);
// mimalloc2.cc and mimalloc3.cc add what their family needs.
//
// Example (what NewMimalloc does):
//
//   MimallocFound f{id};
//   f.api = MimallocApi::Resolve(&f.unresolved);
//   f.layout = MimallocLayoutFor(f.api.version_number);
//   if (f.layout != nullptr && f.layout->thread_segments) return NewMimalloc2(std::move(f));
#ifndef RSSLAB_MEMORY_ALLOC_INTERNAL_MIMALLOC_H_
#define RSSLAB_MEMORY_ALLOC_INTERNAL_MIMALLOC_H_

#include <memory>
#include <string>
#include <utility>

#include "memory/alloc/alloc.h"
#include "memory/alloc/mimalloc_layout.h"

// Types only; the functions are found with dlsym.
#include <mimalloc.h>

namespace rsslab {
namespace alloc {
namespace internal {

// The mimalloc functions the backends call, found with dlsym.
struct MimallocApi {
  void (*process_info)(size_t*, size_t*, size_t*, size_t*, size_t*, size_t*, size_t*,
                       size_t*) = nullptr;
  int (*version)() = nullptr;
  // mimalloc's own signature: long mi_option_get(mi_option_t).
  long (*option_get)(int) = nullptr;        // NOLINT(runtime/int)
  void (*option_set)(int, long) = nullptr;  // NOLINT(runtime/int)
  void (*collect)(bool) = nullptr;
  mi_heap_t* (*heap_get_default)() = nullptr;
  void* (*malloc)(size_t) = nullptr;
  void (*free)(void*) = nullptr;
  bool (*heap_visit_blocks)(const mi_heap_t*, bool, mi_block_visit_fun*, void*) = nullptr;
  int version_number = 0;  // mi_version(), read once

  // Looks every function up; appends the missing ones to *unresolved.
  static MimallocApi Resolve(std::string* unresolved);
};

// What NewMimalloc found, handed to the backend it picks.
struct MimallocFound {
  Allocator::Identity id;
  MimallocApi api;
  const MimallocLayout* layout = nullptr;  // null: a version rsslab has not read
  std::string unresolved;                  // functions dlsym did not find
};

class Mimalloc : public Allocator {
 public:
  explicit Mimalloc(MimallocFound f)
      : Allocator(std::move(f.id)), api_(f.api), layout_(f.layout) {
    NoteUnresolved(f.unresolved);
  }

  std::string Version() const override;
  bool KeepsPagesWithLiveBlocks() const override { return true; }
  // mi_collect(true): the calling thread's heap and abandoned segments.
  Release ReleaseGlobal() const override { return Collect(); }
  Release ReleaseThisThread() const override { return Collect(); }
  DelayOverride OverrideReleaseDelay() const override;
  int64_t RestoreReleaseDelay(const DelayOverride& o) const override;
  const MimallocLayout* mimalloc_layout() const override { return layout_; }
  bool VisitThisThreadHeap(bool all_blocks, mi_block_visit_fun* visit,
                           void* arg) const override;

 protected:
  void FillOwnStats(rsslab::v1::AllocatorStats* out) const override;
  // The calling thread's heap areas: one call per page, one mincore each.
  void FillOwnThreadStats(rsslab::v1::ThreadAllocStats* out) const override;

  Release Collect() const;
  // The mi_option_t of the loaded version's release delay and of its
  // extension; -1 when unknown.
  int DelayOption() const;
  int ExtendOption() const;
  const MimallocApi& api() const { return api_; }
  const MimallocLayout* layout() const { return layout_; }

 private:
  // mi_process_info's figures into `m` (and resident_bytes where the
  // family's committed counter means committed bytes).
  void FillProcessInfo(const std::string& version, rsslab::v1::MimallocStats* m,
                       rsslab::v1::AllocatorStats* out) const;

  const MimallocApi api_;
  const MimallocLayout* const layout_;
};

// 2.0.x and 2.1.x (mimalloc2.cc); 3.x (mimalloc3.cc); f.layout is not null.
std::unique_ptr<Allocator> NewMimalloc2(MimallocFound f);
std::unique_ptr<Allocator> NewMimalloc3(MimallocFound f);

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_INTERNAL_MIMALLOC_H_
