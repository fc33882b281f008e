// What rsslab knows of each mimalloc version family: the option enum and the
// meaning of its counters, read from that version's own sources. The
// mimalloc backends use it to read options and figures, and refuse a version
// not listed here (another version's index reads another option).
//
// Example:
//
//   const rsslab::alloc::MimallocLayout* l = rsslab::alloc::MimallocLayoutFor(209);
//   // l->family == "2.0.x", l->delay_option == "decommit_delay"
//   std::map<std::string, int> ids = rsslab::alloc::MimallocOptionIds(209);
//   // ids["decommit_delay"] == 15
#ifndef RSSLAB_MEMORY_ALLOC_MIMALLOC_LAYOUT_H_
#define RSSLAB_MEMORY_ALLOC_MIMALLOC_LAYOUT_H_

#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace rsslab {
namespace alloc {

// One family, read from that version's include/mimalloc.h, src/options.c,
// src/stats.c and prim/unix/prim.c (tags v2.0.9, v2.1.0-v2.1.9,
// v3.0.0-alpha/v3.0.1; docs/TRIM.md):
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
// The mi_option_t of option `name` in `version`; -1 if `l` is null or the
// option is not in that version.
int MimallocOptionIndex(const MimallocLayout* l, int version, absl::string_view name);

}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_MIMALLOC_LAYOUT_H_
