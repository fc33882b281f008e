#include "memory/alloc/alloc.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <gperftools/malloc_extension.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace alloc {
namespace {

// jemalloc's MALLCTL_ARENAS_ALL: "arena.4096.*" addresses every arena.
constexpr const char* kJemallocPurgeAll = "arena.4096.purge";

template <typename Fn>
void Resolve(const char* symbol, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, symbol));
  if (*fn == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", symbol);
}

std::string NameForLibrary(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view base =
      slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (absl::StartsWith(base, "libjemalloc")) return "jemalloc";
  if (absl::StartsWith(base, "libmimalloc")) return "mimalloc";
  if (absl::StartsWith(base, "libtcmalloc")) return "tcmalloc";
  if (absl::StartsWith(base, "libc.so") || absl::StartsWith(base, "libc-")) {
    return "glibc";
  }
  return "";
}

}  // namespace

namespace {

// 2.0.9's enum as compiled in: the table below must agree with the header
// this binary was built against (Debian 12's mimalloc 2.0.9).
static_assert(mi_option_decommit_delay == 15, "mimalloc.h is not 2.0.9's");
static_assert(mi_option_segment_decommit_delay == 23, "mimalloc.h is not 2.0.9's");
static_assert(mi_option_destroy_on_exit == 25, "mimalloc.h is not 2.0.9's");

// Read from each tag's include/mimalloc.h (mi_option_t) and src/options.c
// (the names behind MIMALLOC_<NAME>); deprecated slots left out.
const MimallocLayout kMimalloc20 = {
    "2.0.x", 209, 211, "decommit_delay", "decommit_extend_delay", true, true, true,
    {
        {"show_errors", 0, 209, 211}, {"show_stats", 1, 209, 211}, {"verbose", 2, 209, 211},
        {"eager_commit", 3, 209, 211}, {"large_os_pages", 6, 209, 211},
        {"reserve_huge_os_pages", 7, 209, 211}, {"reserve_huge_os_pages_at", 8, 209, 211},
        {"reserve_os_memory", 9, 209, 211}, {"page_reset", 11, 209, 211},
        {"abandoned_page_decommit", 12, 209, 211}, {"eager_commit_delay", 14, 209, 211},
        {"decommit_delay", 15, 209, 211}, {"use_numa_nodes", 16, 209, 211},
        {"limit_os_alloc", 17, 209, 211}, {"os_tag", 18, 209, 211},
        {"max_errors", 19, 209, 211}, {"max_warnings", 20, 209, 211},
        {"max_segment_reclaim", 21, 209, 211}, {"allow_decommit", 22, 209, 211},
        {"segment_decommit_delay", 23, 209, 211}, {"decommit_extend_delay", 24, 209, 211},
        {"destroy_on_exit", 25, 209, 211},
    }};

const MimallocLayout kMimalloc21 = {
    "2.1.x", 212, 219, "purge_delay", "purge_extend_delay", true, true, false,
    {
        {"show_errors", 0, 212, 219}, {"show_stats", 1, 212, 219}, {"verbose", 2, 212, 219},
        {"eager_commit", 3, 212, 219}, {"arena_eager_commit", 4, 212, 219},
        {"purge_decommits", 5, 212, 219}, {"allow_large_os_pages", 6, 212, 219},
        {"reserve_huge_os_pages", 7, 212, 219}, {"reserve_huge_os_pages_at", 8, 212, 219},
        {"reserve_os_memory", 9, 212, 219}, {"abandoned_page_purge", 12, 212, 219},
        {"eager_commit_delay", 14, 212, 219}, {"purge_delay", 15, 212, 219},
        {"use_numa_nodes", 16, 212, 219}, {"limit_os_alloc", 17, 212, 212},
        {"disallow_os_alloc", 17, 214, 219}, {"os_tag", 18, 212, 219},
        {"max_errors", 19, 212, 219}, {"max_warnings", 20, 212, 219},
        {"max_segment_reclaim", 21, 212, 219}, {"destroy_on_exit", 22, 212, 219},
        {"arena_reserve", 23, 212, 219}, {"arena_purge_mult", 24, 212, 219},
        {"purge_extend_delay", 25, 212, 219}, {"abandoned_reclaim_on_free", 26, 214, 219},
        {"disallow_arena_alloc", 27, 214, 219}, {"retry_on_oom", 28, 217, 219},
        // 2.1.7 and 2.1.7a both say 217 and differ from here on.
        {"visit_abandoned", 29, 218, 219}, {"guarded_min", 30, 218, 219},
        {"guarded_max", 31, 218, 219}, {"guarded_precise", 32, 218, 219},
        {"guarded_sample_rate", 33, 218, 219}, {"guarded_sample_seed", 34, 218, 219},
        {"target_segments_per_thread", 35, 218, 219},
    }};

const MimallocLayout kMimalloc3 = {
    "3.x", 300, 301, "purge_delay", "purge_extend_delay", false, false, true,
    {
        {"show_errors", 0, 300, 301}, {"show_stats", 1, 300, 301}, {"verbose", 2, 300, 301},
        {"eager_commit", 3, 300, 301}, {"arena_eager_commit", 4, 300, 301},
        {"purge_decommits", 5, 300, 301}, {"allow_large_os_pages", 6, 300, 301},
        {"reserve_huge_os_pages", 7, 300, 301}, {"reserve_huge_os_pages_at", 8, 300, 301},
        {"reserve_os_memory", 9, 300, 301}, {"abandoned_page_purge", 12, 300, 301},
        {"eager_commit_delay", 14, 300, 301}, {"purge_delay", 15, 300, 301},
        {"use_numa_nodes", 16, 300, 301}, {"disallow_os_alloc", 17, 300, 301},
        {"os_tag", 18, 300, 301}, {"max_errors", 19, 300, 301},
        {"max_warnings", 20, 300, 301}, {"max_segment_reclaim", 21, 300, 301},
        {"destroy_on_exit", 22, 300, 301}, {"arena_reserve", 23, 300, 301},
        {"arena_purge_mult", 24, 300, 301}, {"purge_extend_delay", 25, 300, 301},
        {"disallow_arena_alloc", 26, 300, 301}, {"retry_on_oom", 27, 300, 301},
        {"visit_abandoned", 28, 300, 301}, {"guarded_min", 29, 300, 301},
        {"guarded_max", 30, 300, 301}, {"guarded_precise", 31, 300, 301},
        {"guarded_sample_rate", 32, 300, 301}, {"guarded_sample_seed", 33, 300, 301},
        {"target_segments_per_thread", 34, 300, 301}, {"reclaim_on_free", 35, 300, 301},
        {"page_full_retain", 36, 300, 301}, {"page_max_candidates", 37, 300, 301},
        {"max_vabits", 38, 300, 301}, {"pagemap_commit", 39, 300, 301},
        {"page_commit_on_demand", 40, 300, 301},
    }};

int OptionIndex(const MimallocLayout* l, int version, absl::string_view name) {
  if (l == nullptr) return -1;
  for (const MimallocOption& o : l->options) {
    if (name == o.name && version >= o.min_version && version <= o.max_version) return o.index;
  }
  return -1;
}

}  // namespace

const MimallocLayout* MimallocLayoutFor(int version) {
  for (const MimallocLayout* l : {&kMimalloc20, &kMimalloc21, &kMimalloc3}) {
    if (version >= l->min_version && version <= l->max_version) return l;
  }
  return nullptr;
}

std::map<std::string, int> MimallocOptionIds(int version) {
  std::map<std::string, int> ids;
  const MimallocLayout* l = MimallocLayoutFor(version);
  if (l == nullptr) return ids;
  for (const MimallocOption& o : l->options) {
    if (version >= o.min_version && version <= o.max_version) ids[o.name] = o.index;
  }
  return ids;
}

const Allocator& Allocator::Get() {
  static const Allocator* const instance = new Allocator();  // never destroyed
  return *instance;
}

Allocator::Allocator() {
  // Outside the heap: a 128 KiB std::string here is served by mmap and,
  // freed, raises glibc's mmap and trim thresholds for the whole process.
  // This runs on the first snapshot, so it would change how the process
  // being measured allocates from then on.
  absl::StatusOr<procfs::MappedText> maps = procfs::MappedText::Read(0, "maps");
  procfs::MappedAllocator mapped;
  if (maps.ok()) {
    mapped = procfs::DetectAllocator(maps->view());
  } else {
    mapped.name = "glibc";
    missing_ = absl::StrCat("maps unreadable: ", maps.status().message());
  }
  name_ = mapped.name;
  library_ = mapped.library;

  // Which library malloc itself resolves to is the final word: a mapped
  // allocator that does not interpose malloc (linked only for its API)
  // serves nothing.
  Dl_info info;
  void* malloc_sym = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_sym != nullptr && dladdr(malloc_sym, &info) != 0 &&
      info.dli_fname != nullptr) {
    std::string by_symbol = NameForLibrary(info.dli_fname);
    if (!by_symbol.empty() && by_symbol != name_) {
      absl::StrAppend(&missing_, missing_.empty() ? "" : "; ", "maps suggested ",
                      name_, " but malloc resolves to ", info.dli_fname);
      name_ = by_symbol;
      library_ = info.dli_fname;
    }
  }

  std::string unresolved;
  if (name_ == "jemalloc") {
    Resolve("mallctl", &mallctl_, &unresolved);
  } else if (name_ == "mimalloc") {
    Resolve("mi_process_info", &mi_process_info_, &unresolved);
    Resolve("mi_version", &mi_version_, &unresolved);
    Resolve("mi_option_get", &mi_option_get_, &unresolved);
    Resolve("mi_option_set", &mi_option_set_, &unresolved);
    Resolve("mi_collect", &mi_collect_, &unresolved);
    Resolve("mi_heap_get_default", &mi_heap_get_default_, &unresolved);
    Resolve("mi_malloc", &mi_malloc_, &unresolved);
    Resolve("mi_free", &mi_free_, &unresolved);
    Resolve("mi_heap_visit_blocks", &mi_heap_visit_blocks_, &unresolved);
    if (mi_version_ != nullptr) {
      mi_version_number_ = mi_version_();
      mi_layout_ = MimallocLayoutFor(mi_version_number_);
    }
  } else if (name_ == "tcmalloc") {
    Resolve("MallocExtension_GetNumericProperty", &tc_get_numeric_, &unresolved);
    Resolve("MallocExtension_ReleaseFreeMemory", &tc_release_free_, &unresolved);
    Resolve("MallocExtension_MarkThreadIdle", &tc_mark_idle_, &unresolved);
    Resolve("_ZN15MallocExtension8instanceEv", &tc_instance_, &unresolved);
    // Only the version text needs it: its absence is no missing figure.
    std::string no_version;
    Resolve("tc_version", &tc_version_, &no_version);
  }
  if (!unresolved.empty()) {
    absl::StrAppend(&missing_, missing_.empty() ? "" : "; ",
                    "dlsym found no ", unresolved);
  }
}

void Allocator::FillStats(rsslab::v1::AllocatorStats* out) const {
  if (name_ == "jemalloc") {
    FillJemalloc(out);
  } else if (name_ == "mimalloc") {
    FillMimalloc(out);
  } else if (name_ == "tcmalloc") {
    FillTcmalloc(out);
  } else {
    FillGlibc(out);
  }
  if (!missing_.empty()) {
    out->set_note(out->note().empty() ? missing_
                                      : absl::StrCat(out->note(), "; ", missing_));
  }
}

void Allocator::FillGlibc(rsslab::v1::AllocatorStats* out) const {
  rsslab::v1::GlibcStats* g = out->mutable_glibc();
  struct mallinfo2 mi = mallinfo2();
  g->set_version(gnu_get_libc_version());
  g->set_arena(static_cast<int64_t>(mi.arena));
  g->set_ordblks(static_cast<int64_t>(mi.ordblks));
  g->set_smblks(static_cast<int64_t>(mi.smblks));
  g->set_hblks(static_cast<int64_t>(mi.hblks));
  g->set_hblkhd(static_cast<int64_t>(mi.hblkhd));
  g->set_fsmblks(static_cast<int64_t>(mi.fsmblks));
  g->set_uordblks(static_cast<int64_t>(mi.uordblks));
  g->set_fordblks(static_cast<int64_t>(mi.fordblks));
  g->set_keepcost(static_cast<int64_t>(mi.keepcost));
  out->set_allocated_bytes(static_cast<int64_t>(mi.uordblks + mi.hblkhd));
  out->set_resident_bytes(0);
  std::string note =
      "glibc has no resident figure (malloc_trim releases pages inside arenas "
      "without changing system bytes): use RSS";
  absl::Status s = ReadMallocInfo(g);
  if (!s.ok()) absl::StrAppend(&note, "; malloc_info: ", s.message());
  out->set_note(note);
}

void Allocator::JemallocEpoch() const {
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  mallctl_("epoch", &epoch, &len, &epoch, len);
}

void Allocator::FillJemalloc(rsslab::v1::AllocatorStats* out) const {
  if (mallctl_ == nullptr) return;
  JemallocEpoch();  // stats.* are a snapshot taken at the last epoch bump
  rsslab::v1::JemallocStats* j = out->mutable_jemalloc();
  std::string failed;
  auto get_size = [&](const char* key) -> int64_t {
    size_t v = 0, len = sizeof(v);
    if (mallctl_(key, &v, &len, nullptr, 0) != 0) {
      absl::StrAppend(&failed, failed.empty() ? "" : ", ", key);
      return 0;
    }
    return static_cast<int64_t>(v);
  };
  j->set_allocated(get_size("stats.allocated"));
  j->set_active(get_size("stats.active"));
  j->set_resident(get_size("stats.resident"));
  j->set_mapped(get_size("stats.mapped"));
  j->set_retained(get_size("stats.retained"));
  j->set_metadata(get_size("stats.metadata"));
  unsigned narenas = 0;
  size_t len = sizeof(narenas);
  if (mallctl_("arenas.narenas", &narenas, &len, nullptr, 0) == 0) {
    j->set_narenas(static_cast<int32_t>(narenas));
  }
  bool bg = false;
  len = sizeof(bg);
  if (mallctl_("background_thread", &bg, &len, nullptr, 0) == 0) {
    j->set_background_thread(bg);
  }
  ssize_t decay = 0;
  len = sizeof(decay);
  if (mallctl_("opt.dirty_decay_ms", &decay, &len, nullptr, 0) == 0) {
    j->set_dirty_decay_ms(decay);
  }
  len = sizeof(decay);
  if (mallctl_("opt.muzzy_decay_ms", &decay, &len, nullptr, 0) == 0) {
    j->set_muzzy_decay_ms(decay);
  }
  const char* version = nullptr;
  len = sizeof(version);
  if (mallctl_("version", &version, &len, nullptr, 0) == 0 && version) {
    j->set_version(version);
  }
  out->set_allocated_bytes(j->allocated());
  out->set_resident_bytes(j->resident());
  if (!failed.empty()) {
    out->set_note(absl::StrCat("mallctl failed for ", failed,
                               " (jemalloc built without stats?)"));
  }
}

void Allocator::FillMimalloc(rsslab::v1::AllocatorStats* out) const {
  rsslab::v1::MimallocStats* m = out->mutable_mimalloc();
  std::string note =
      "mimalloc keeps no allocated-bytes counter in release builds; "
      "resident_bytes is its committed bytes (its current_rss estimate)";
  out->set_allocated_bytes(0);
  out->set_resident_bytes(0);
  if (mi_version_ == nullptr) {
    m->add_refused("everything: mi_version not found, so no layout can be chosen");
    out->set_note(note);
    return;
  }
  const std::string version = MimallocVersionText(mi_version_number_);
  m->set_version(mi_version_number_);
  m->set_version_text(version);
  if (mi_layout_ == nullptr) {
    // Another version's indices would read other options, and its stats
    // another counter: print nothing rather than something wrong.
    m->add_refused(absl::StrCat("options, current_rss, current_commit, peak_commit: mimalloc ",
                                version, " (mi_version ", mi_version_number_,
                                "): layout not read by rsslab (knows 2.0.9-2.1.1, 2.1.2-2.1.9, "
                                "3.0.0-3.0.1)"));
    out->set_note(absl::StrCat(note, "; mimalloc ", version, " not interpreted"));
    return;
  }
  m->set_layout(mi_layout_->family);
  if (mi_process_info_ != nullptr) {
    size_t elapsed = 0, user = 0, sys = 0, rss = 0, peak_rss = 0, commit = 0,
           peak_commit = 0, faults = 0;
    mi_process_info_(&elapsed, &user, &sys, &rss, &peak_rss, &commit,
                     &peak_commit, &faults);
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
    if (mi_layout_->commit_counter) {
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
  if (mi_option_get_ != nullptr) {
    for (const auto& [option, id] : MimallocOptionIds(mi_version_number_)) {
      (*m->mutable_options())[option] = mi_option_get_(id);
    }
  }
  if (m->refused_size() > 0) absl::StrAppend(&note, "; refused: ", absl::StrJoin(m->refused(), "; "));
  out->set_note(note);
}

int Allocator::MimallocDelayOption() const {
  return mi_layout_ == nullptr ? -1
                               : OptionIndex(mi_layout_, mi_version_number_, mi_layout_->delay_option);
}

int Allocator::MimallocExtendOption() const {
  return mi_layout_ == nullptr
             ? -1
             : OptionIndex(mi_layout_, mi_version_number_, mi_layout_->extend_option);
}

void Allocator::FillTcmalloc(rsslab::v1::AllocatorStats* out) const {
  rsslab::v1::TcmallocStats* t = out->mutable_tcmalloc();
  if (tc_version_ != nullptr) {
    const char* v = tc_version_(nullptr, nullptr, nullptr);
    if (v != nullptr) t->set_version(v);
  }
  if (tc_get_numeric_ != nullptr) {
    auto get = [&](const char* key) -> int64_t {
      size_t v = 0;
      return tc_get_numeric_(key, &v) ? static_cast<int64_t>(v) : 0;
    };
    t->set_current_allocated_bytes(get("generic.current_allocated_bytes"));
    t->set_heap_size(get("generic.heap_size"));
    t->set_pageheap_free_bytes(get("tcmalloc.pageheap_free_bytes"));
    t->set_pageheap_unmapped_bytes(get("tcmalloc.pageheap_unmapped_bytes"));
    t->set_current_total_thread_cache_bytes(
        get("tcmalloc.current_total_thread_cache_bytes"));
    out->set_allocated_bytes(t->current_allocated_bytes());
    out->set_resident_bytes(t->heap_size() - t->pageheap_unmapped_bytes());
  }
  if (tc_instance_ != nullptr) {
    // gperftools has no C wrapper for the release rate; the virtual call
    // needs only the class layout from its header, not a link.
    auto* ext = static_cast<MallocExtension*>(tc_instance_());
    if (ext != nullptr) t->set_release_rate(ext->GetMemoryReleaseRate());
  }
}

int64_t Allocator::ResidentBytes() const {
  if (name_ == "jemalloc" && mallctl_ != nullptr) {
    JemallocEpoch();
    size_t v = 0, len = sizeof(v);
    if (mallctl_("stats.resident", &v, &len, nullptr, 0) == 0) {
      return static_cast<int64_t>(v);
    }
  } else if (name_ == "mimalloc" && mi_process_info_ != nullptr && mi_layout_ != nullptr &&
             mi_layout_->commit_counter) {
    size_t e, u, s, rss, peak_rss, commit = 0, peak_commit, faults;
    mi_process_info_(&e, &u, &s, &rss, &peak_rss, &commit, &peak_commit,
                     &faults);
    const int64_t c = static_cast<int64_t>(commit);
    return c < 0 ? -1 : c;  // a wrapped counter (FillMimalloc) is no figure
  } else if (name_ == "tcmalloc" && tc_get_numeric_ != nullptr) {
    size_t heap = 0, unmapped = 0;
    if (tc_get_numeric_("generic.heap_size", &heap) &&
        tc_get_numeric_("tcmalloc.pageheap_unmapped_bytes", &unmapped)) {
      return static_cast<int64_t>(heap) - static_cast<int64_t>(unmapped);
    }
  }
  return -1;
}

int64_t Allocator::AllocatedBytes() const {
  if (name_ == "jemalloc" && mallctl_ != nullptr) {
    JemallocEpoch();
    size_t v = 0, len = sizeof(v);
    if (mallctl_("stats.allocated", &v, &len, nullptr, 0) == 0) return static_cast<int64_t>(v);
  } else if (name_ == "tcmalloc" && tc_get_numeric_ != nullptr) {
    size_t v = 0;
    if (tc_get_numeric_("generic.current_allocated_bytes", &v)) return static_cast<int64_t>(v);
  }
  return -1;
}

int64_t Allocator::InUseBytesByWalk() const {
  if (name_ != "glibc") return -1;
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

bool Allocator::KeepsPagesWithLiveBlocks() const { return name_ == "mimalloc"; }

int Allocator::JemallocPurge() const {
  int ret = mallctl_(kJemallocPurgeAll, nullptr, nullptr, nullptr, 0);
  JemallocEpoch();  // so the next stats read sees the purge
  return ret;
}

Allocator::Release Allocator::ReleaseGlobal() const {
  if (name_ == "jemalloc") {
    if (mallctl_ == nullptr) return {"none (mallctl not found)", -1};
    return {absl::StrCat("mallctl(", kJemallocPurgeAll, ")"), JemallocPurge()};
  }
  if (name_ == "mimalloc") {
    if (mi_collect_ == nullptr) return {"none (mi_collect not found)", -1};
    mi_collect_(true);
    return {"mi_collect(true)", 0};
  }
  if (name_ == "tcmalloc") {
    if (tc_release_free_ == nullptr) {
      return {"none (MallocExtension_ReleaseFreeMemory not found)", -1};
    }
    tc_release_free_();
    return {"MallocExtension_ReleaseFreeMemory()", 0};
  }
  return {"malloc_trim(0)", malloc_trim(0)};
}

Allocator::Release Allocator::ReleaseThisThread() const {
  if (name_ == "jemalloc") {
    if (mallctl_ == nullptr) return {"none (mallctl not found)", -1};
    return {"mallctl(thread.tcache.flush)",
            mallctl_("thread.tcache.flush", nullptr, nullptr, nullptr, 0)};
  }
  if (name_ == "mimalloc") {
    if (mi_collect_ == nullptr) return {"none (mi_collect not found)", -1};
    mi_collect_(true);
    // 3.x: the pages still live in this heap keep whatever their slices
    // held before, past the part they use (alloc.h, PurgePageTails).
    if (mi_layout_ != nullptr && !mi_layout_->thread_segments && mi_heap_get_default_ != nullptr &&
        mi_heap_visit_blocks_ != nullptr) {
      const PageTails t = PurgePageTails();
      return {"mi_collect(true)+madvise(page tails)", t.drops.failed == 0 ? 0 : -1};
    }
    return {"mi_collect(true)", 0};
  }
  if (name_ == "tcmalloc") {
    if (tc_mark_idle_ == nullptr) {
      return {"none (MallocExtension_MarkThreadIdle not found)", -1};
    }
    tc_mark_idle_();
    return {"MallocExtension_MarkThreadIdle()", 0};
  }
  return {"none", 0};
}

Allocator::Release Allocator::ReleaseAfterThreads() const {
  if (name_ == "jemalloc") {
    if (mallctl_ == nullptr) return {"none (mallctl not found)", -1};
    return {absl::StrCat("mallctl(", kJemallocPurgeAll, ")"), JemallocPurge()};
  }
  if (name_ == "tcmalloc") {
    if (tc_release_free_ == nullptr) {
      return {"none (MallocExtension_ReleaseFreeMemory not found)", -1};
    }
    tc_release_free_();
    return {"MallocExtension_ReleaseFreeMemory()", 0};
  }
  return {"none", 0};
}

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

bool Allocator::VisitThisThreadHeap(bool all_blocks, mi_block_visit_fun* visit, void* arg) const {
  if (name_ != "mimalloc" || mi_heap_get_default_ == nullptr || mi_heap_visit_blocks_ == nullptr) {
    return false;
  }
  mi_heap_visit_blocks_(mi_heap_get_default_(), all_blocks, visit, arg);
  return true;
}

Allocator::PageTails Allocator::PurgePageTails() const {
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

bool Allocator::HasFollowUp() const {
  return name_ == "mimalloc" && mi_layout_ != nullptr && mi_layout_->thread_segments &&
         mi_malloc_ != nullptr && mi_free_ != nullptr;
}

absl::Duration Allocator::FollowUpDelay() const {
  if (!HasFollowUp() || mi_option_get_ == nullptr) return absl::ZeroDuration();
  const int delay_option = MimallocDelayOption();
  if (delay_option < 0) return absl::ZeroDuration();
  long delay = mi_option_get_(delay_option);  // NOLINT(runtime/int)
  if (delay <= 0) return absl::ZeroDuration();  // 0: decommitted at free; < 0: never
  // Past the delay and the extension a later free may add, with a margin
  // for the clock's granularity.
  const int extend_option = MimallocExtendOption();
  long extend = extend_option < 0 ? 0 : mi_option_get_(extend_option);  // NOLINT(runtime/int)
  return absl::Milliseconds(delay + std::max(0L, extend) + 5);
}

Allocator::Release Allocator::FollowUpThisThread() const {
  if (!HasFollowUp()) return {"none", 0};
  // Larger than MI_MEDIUM_OBJ_SIZE_MAX (128 KiB): a large block always gets
  // a fresh page of its own, so the allocation goes through the segment
  // page allocator that runs the expired decommits. Through the dlsym'd
  // pointers so the compiler cannot drop the pair.
  constexpr size_t kLargeBlock = 256 << 10;
  void* p = mi_malloc_(kLargeBlock);
  mi_free_(p);
  return {"mi_malloc(256 KiB)+mi_free", p == nullptr ? -1 : 0};
}

Allocator::DelayOverride Allocator::OverrideReleaseDelay() const {
  DelayOverride o;
  if (name_ != "mimalloc" || mi_option_get_ == nullptr) return o;
  // An unknown version's index could be any option: leave it alone.
  const int id = MimallocDelayOption();
  if (id < 0) return o;
  o.option = absl::StrCat("mimalloc ", mi_layout_->delay_option);
  o.before = mi_option_get_(id);
  o.during = o.before;
  // < 0 means "never decommit": a choice, not a timer; 0 is immediate already.
  if (o.before <= 0 || mi_option_set_ == nullptr) return o;
  mi_option_set_(id, 0);
  o.during = mi_option_get_(id);
  o.applied = true;
  return o;
}

int64_t Allocator::RestoreReleaseDelay(const DelayOverride& o) const {
  const int id = MimallocDelayOption();
  if (o.option.empty() || mi_option_get_ == nullptr || id < 0) return 0;
  if (o.applied && mi_option_set_ != nullptr) {
    mi_option_set_(id, static_cast<long>(o.before));  // NOLINT(runtime/int)
  }
  return mi_option_get_(id);
}

Allocator::Release Allocator::ReleaseAfterRestore(const DelayOverride& o) const {
  // 3.x: the arenas' scheduled purges (from before the trim, and from
  // requests served while it ran) are forced only by a collect at a
  // non-zero delay; mi_collect(true) purges every arena, whichever thread.
  if (name_ != "mimalloc" || !o.applied || mi_layout_ == nullptr || mi_layout_->thread_segments ||
      mi_collect_ == nullptr) {
    return {"", 0};
  }
  mi_collect_(true);
  return {"mi_collect(true)", 0};
}

void Allocator::FillThreadStats(rsslab::v1::ThreadAllocStats* out) const {
  out->set_heap_committed_bytes(-1);
  out->set_heap_used_bytes(-1);
  out->set_heap_pages(-1);
  out->set_heap_reserved_bytes(-1);
  out->set_heap_resident_bytes(-1);
  out->set_heap_small_block_resident_bytes(-1);
  out->set_heap_small_block_used_bytes(-1);
  out->set_arena(-1);
  out->set_arena_active_bytes(-1);
  out->set_arena_dirty_bytes(-1);
  out->set_arena_muzzy_bytes(-1);
  out->set_arena_resident_bytes(-1);
  out->set_arena_tcache_bytes(-1);
  out->set_thread_net_allocated_bytes(-1);
  struct Sums {
    int64_t committed = 0, used = 0, pages = 0, reserved = 0;
    int64_t resident = 0, small_resident = 0, small_used = 0;
  } sums;
  // Areas only (visit_all_blocks=false): one call per page, no block walk;
  // one mincore per page for what is resident.
  if (VisitThisThreadHeap(
          false,
          [](const mi_heap_t*, const mi_heap_area_t* area, void* block, size_t, void* arg) {
            if (block == nullptr && area != nullptr) {
              auto* s = static_cast<Sums*>(arg);
              const int64_t used = static_cast<int64_t>(area->used * area->block_size);
              s->committed += static_cast<int64_t>(area->committed);
              s->used += used;
              s->reserved += static_cast<int64_t>(area->reserved);
              ++s->pages;
              const uintptr_t base = reinterpret_cast<uintptr_t>(area->blocks);
              const int64_t resident =
                  base == 0 ? 0 : ResidentBytesIn(base, base + area->committed);
              if (resident < 0 || s->resident < 0) {
                s->resident = -1;
              } else {
                s->resident += resident;
                if (!FreeBlocksHoldWholePages(AreaStride(*area))) {
                  s->small_resident += resident;
                  s->small_used += used;
                }
              }
            }
            return true;
          },
          &sums)) {
    out->set_heap_committed_bytes(sums.committed);
    out->set_heap_used_bytes(sums.used);
    out->set_heap_pages(sums.pages);
    out->set_heap_reserved_bytes(sums.reserved);
    out->set_heap_resident_bytes(sums.resident);
    out->set_heap_small_block_resident_bytes(sums.resident < 0 ? -1 : sums.small_resident);
    out->set_heap_small_block_used_bytes(sums.small_used);
  } else if (name_ == "jemalloc" && mallctl_ != nullptr) {
    unsigned arena = 0;
    size_t len = sizeof(arena);
    if (mallctl_("thread.arena", &arena, &len, nullptr, 0) != 0) return;
    out->set_arena(static_cast<int32_t>(arena));
    JemallocEpoch();
    size_t page = 4096;
    len = sizeof(page);
    mallctl_("arenas.page", &page, &len, nullptr, 0);
    auto get = [&](const char* field, bool pages) -> int64_t {
      std::string key = absl::StrCat("stats.arenas.", arena, ".", field);
      size_t v = 0, n = sizeof(v);
      if (mallctl_(key.c_str(), &v, &n, nullptr, 0) != 0) return -1;
      return static_cast<int64_t>(pages ? v * page : v);
    };
    out->set_arena_active_bytes(get("pactive", true));
    out->set_arena_dirty_bytes(get("pdirty", true));
    out->set_arena_muzzy_bytes(get("pmuzzy", true));
    out->set_arena_resident_bytes(get("resident", false));
    out->set_arena_tcache_bytes(get("tcache_bytes", false));
    uint64_t allocated = 0, deallocated = 0;
    size_t n1 = sizeof(allocated), n2 = sizeof(deallocated);
    if (mallctl_("thread.allocated", &allocated, &n1, nullptr, 0) == 0 &&
        mallctl_("thread.deallocated", &deallocated, &n2, nullptr, 0) == 0) {
      out->set_thread_net_allocated_bytes(static_cast<int64_t>(allocated - deallocated));
    }
  }
}

absl::Status ReadMallocInfo(rsslab::v1::GlibcStats* out) {
  // The XML (~2 KiB per arena) is written into an mmap'd buffer through a
  // stdio buffer carved from the same mapping, so the probe costs the heap
  // only fmemopen's FILE. Pages never written are never touched.
  constexpr size_t kIoBuf = 64 << 10;
  for (size_t size = 4 << 20; size <= (256u << 20); size *= 4) {
    void* mem = mmap(nullptr, size + kIoBuf, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap");
    char* buf = static_cast<char*>(mem);
    FILE* fp = fmemopen(buf, size, "w");
    if (fp == nullptr) {
      int err = errno;
      munmap(mem, size + kIoBuf);
      return absl::ErrnoToStatus(err, "fmemopen");
    }
    setvbuf(fp, buf + size, _IOFBF, kIoBuf);
    int rc = malloc_info(0, fp);
    fflush(fp);
    long n = ftell(fp);  // NOLINT(runtime/int): stdio's type
    fclose(fp);
    absl::Status status;
    bool full = n < 0 || static_cast<size_t>(n) >= size - 1;
    if (rc != 0) {
      status = absl::InternalError("malloc_info failed");
    } else if (!full) {
      status = ParseMallocInfo(absl::string_view(buf, static_cast<size_t>(n)), out);
    }
    munmap(mem, size + kIoBuf);
    if (rc != 0 || !full) return status;
  }
  return absl::ResourceExhaustedError("malloc_info XML larger than 256 MiB");
}

}  // namespace alloc
}  // namespace rsslab
