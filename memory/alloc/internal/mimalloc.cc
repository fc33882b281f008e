#include "memory/alloc/internal/mimalloc.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "memory/alloc/internal/backends.h"
#include "memory/alloc/internal/dl.h"
#include "memory/alloc/internal/pages.h"
#include "memory/alloc/version.h"

namespace rsslab {
namespace alloc {
namespace internal {

MimallocApi MimallocApi::Resolve(std::string* unresolved) {
  MimallocApi api;
  internal::Resolve("mi_process_info", &api.process_info, unresolved);
  internal::Resolve("mi_version", &api.version, unresolved);
  internal::Resolve("mi_option_get", &api.option_get, unresolved);
  internal::Resolve("mi_option_set", &api.option_set, unresolved);
  internal::Resolve("mi_collect", &api.collect, unresolved);
  internal::Resolve("mi_heap_get_default", &api.heap_get_default, unresolved);
  internal::Resolve("mi_malloc", &api.malloc, unresolved);
  internal::Resolve("mi_free", &api.free, unresolved);
  internal::Resolve("mi_heap_visit_blocks", &api.heap_visit_blocks, unresolved);
  if (api.version != nullptr) api.version_number = api.version();
  return api;
}

std::unique_ptr<Allocator> NewMimalloc(Allocator::Identity id) {
  MimallocFound f{std::move(id)};
  f.api = MimallocApi::Resolve(&f.unresolved);
  if (f.api.version != nullptr) f.layout = MimallocLayoutFor(f.api.version_number);
  if (f.layout == nullptr) return std::make_unique<Mimalloc>(std::move(f));
  if (f.layout->thread_segments) return NewMimalloc2(std::move(f));
  return NewMimalloc3(std::move(f));
}

std::string Mimalloc::Version() const {
  return api_.version_number > 0 ? MimallocVersionText(api_.version_number) : "";
}

Allocator::Release Mimalloc::Collect() const {
  if (api_.collect == nullptr) return NotFound("mi_collect");
  api_.collect(true);
  return {"mi_collect(true)", 0};
}

int Mimalloc::DelayOption() const {
  return layout_ == nullptr
             ? -1
             : MimallocOptionIndex(layout_, api_.version_number, layout_->delay_option);
}

int Mimalloc::ExtendOption() const {
  return layout_ == nullptr
             ? -1
             : MimallocOptionIndex(layout_, api_.version_number, layout_->extend_option);
}

bool Mimalloc::VisitThisThreadHeap(bool all_blocks, mi_block_visit_fun* visit, void* arg) const {
  if (api_.heap_get_default == nullptr || api_.heap_visit_blocks == nullptr) return false;
  api_.heap_visit_blocks(api_.heap_get_default(), all_blocks, visit, arg);
  return true;
}

Allocator::DelayOverride Mimalloc::OverrideReleaseDelay() const {
  DelayOverride o;
  if (api_.option_get == nullptr) return o;
  // An unknown version's index could be any option: leave it alone.
  const int id = DelayOption();
  if (id < 0) return o;
  o.option = absl::StrCat("mimalloc ", layout_->delay_option);
  o.before = api_.option_get(id);
  o.during = o.before;
  // < 0 means "never decommit": a choice, not a timer; 0 is immediate already.
  if (o.before <= 0 || api_.option_set == nullptr) return o;
  api_.option_set(id, 0);
  o.during = api_.option_get(id);
  o.applied = true;
  return o;
}

int64_t Mimalloc::RestoreReleaseDelay(const DelayOverride& o) const {
  const int id = DelayOption();
  if (o.option.empty() || api_.option_get == nullptr || id < 0) return 0;
  if (o.applied && api_.option_set != nullptr) {
    api_.option_set(id, static_cast<long>(o.before));  // NOLINT(runtime/int)
  }
  return api_.option_get(id);
}

void Mimalloc::FillOwnStats(rsslab::v1::AllocatorStats* out) const {
  rsslab::v1::MimallocStats* m = out->mutable_mimalloc();
  std::string note =
      "mimalloc keeps no allocated-bytes counter in release builds; "
      "resident_bytes is its committed bytes (its current_rss estimate)";
  out->set_allocated_bytes(0);
  out->set_resident_bytes(0);
  if (api_.version == nullptr) {
    m->add_refused("everything: mi_version not found, so no layout can be chosen");
    out->set_note(note);
    return;
  }
  const std::string version = MimallocVersionText(api_.version_number);
  m->set_version(api_.version_number);
  m->set_version_text(version);
  if (layout_ == nullptr) {
    // Another version's indices would read other options, and its stats
    // another counter: print nothing rather than something wrong.
    m->add_refused(absl::StrCat("options, current_rss, current_commit, peak_commit: mimalloc ",
                                version, " (mi_version ", api_.version_number,
                                "): layout not read by rsslab (knows 2.0.9-2.1.1, 2.1.2-2.1.9, "
                                "3.0.0-3.0.1)"));
    out->set_note(absl::StrCat(note, "; mimalloc ", version, " not interpreted"));
    return;
  }
  m->set_layout(layout_->family);
  if (api_.process_info != nullptr) FillProcessInfo(version, m, out);
  if (api_.option_get != nullptr) {
    for (const auto& [option, id] : MimallocOptionIds(api_.version_number)) {
      (*m->mutable_options())[option] = api_.option_get(id);
    }
  }
  if (m->refused_size() > 0) absl::StrAppend(&note, "; refused: ", absl::StrJoin(m->refused(), "; "));
  out->set_note(note);
}

void Mimalloc::FillProcessInfo(const std::string& version, rsslab::v1::MimallocStats* m,
                               rsslab::v1::AllocatorStats* out) const {
  size_t elapsed = 0, user = 0, sys = 0, rss = 0, peak_rss = 0, commit = 0, peak_commit = 0,
         faults = 0;
  api_.process_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
  // The committed counter is a signed sum of commits and decommits that
  // mimalloc casts to size_t; a version whose accounting loses a decommit
  // or an adjustment (3.0.1 under this server: -6.6 GiB) wraps.
  auto figure = [&](const char* name, size_t v, void (rsslab::v1::MimallocStats::*set)(int64_t)) {
    const int64_t signed_v = static_cast<int64_t>(v);
    if (signed_v < 0) {
      m->add_refused(absl::StrCat(name, ": mimalloc ", version, " reported ", signed_v,
                                  " (its committed counter went negative)"));
      (m->*set)(0);
      return false;
    }
    (m->*set)(signed_v);
    return true;
  };
  figure("peak_rss", peak_rss, &rsslab::v1::MimallocStats::set_peak_rss);
  if (layout_->commit_counter) {
    figure("current_rss", rss, &rsslab::v1::MimallocStats::set_current_rss);
    if (figure("current_commit", commit, &rsslab::v1::MimallocStats::set_current_commit)) {
      out->set_resident_bytes(static_cast<int64_t>(commit));
    }
    figure("peak_commit", peak_commit, &rsslab::v1::MimallocStats::set_peak_commit);
  } else {
    m->add_refused(absl::StrCat(
        "current_rss, current_commit, peak_commit: mimalloc ", version,
        "'s committed counter drifts down with every purge of pages committed on demand "
        "and goes negative (now ",
        static_cast<int64_t>(commit), "); use RSS"));
  }
  m->set_page_faults(static_cast<int64_t>(faults));
}

void Mimalloc::FillOwnThreadStats(rsslab::v1::ThreadAllocStats* out) const {
  struct Sums {
    int64_t committed = 0, used = 0, pages = 0, reserved = 0;
    int64_t resident = 0, small_resident = 0, small_used = 0;
  } sums;
  // Areas only (visit_all_blocks=false): one call per page, no block walk;
  // one mincore per page for what is resident.
  const bool visited = VisitThisThreadHeap(
      false,
      [](const mi_heap_t*, const mi_heap_area_t* area, void* block, size_t, void* arg) {
        if (block != nullptr || area == nullptr) return true;
        auto* s = static_cast<Sums*>(arg);
        const int64_t used = static_cast<int64_t>(area->used * area->block_size);
        s->committed += static_cast<int64_t>(area->committed);
        s->used += used;
        s->reserved += static_cast<int64_t>(area->reserved);
        ++s->pages;
        const uintptr_t base = reinterpret_cast<uintptr_t>(area->blocks);
        const int64_t resident = base == 0 ? 0 : ResidentBytesIn(base, base + area->committed);
        if (resident < 0 || s->resident < 0) {
          s->resident = -1;
        } else {
          s->resident += resident;
          if (!FreeBlocksHoldWholePages(AreaStride(*area))) {
            s->small_resident += resident;
            s->small_used += used;
          }
        }
        return true;
      },
      &sums);
  if (!visited) return;
  out->set_heap_committed_bytes(sums.committed);
  out->set_heap_used_bytes(sums.used);
  out->set_heap_pages(sums.pages);
  out->set_heap_reserved_bytes(sums.reserved);
  out->set_heap_resident_bytes(sums.resident);
  out->set_heap_small_block_resident_bytes(sums.resident < 0 ? -1 : sums.small_resident);
  out->set_heap_small_block_used_bytes(sums.small_used);
}

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
