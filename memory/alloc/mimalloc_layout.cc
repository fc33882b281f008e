#include "memory/alloc/mimalloc_layout.h"

#include <mimalloc.h>

namespace rsslab {
namespace alloc {
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

}  // namespace

int MimallocOptionIndex(const MimallocLayout* l, int version, absl::string_view name) {
  if (l == nullptr) return -1;
  for (const MimallocOption& o : l->options) {
    if (name == o.name && version >= o.min_version && version <= o.max_version) return o.index;
  }
  return -1;
}

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

}  // namespace alloc
}  // namespace rsslab
