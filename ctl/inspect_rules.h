// The diagnosis of an InspectReport: each rule looks at the report alone
// (no further reads), and adds a Finding with its evidence and the fix the
// field reports found. docs/INSPECT.md lists the rules and their tests.
//
// Example:
//   absl::StatusOr<rsslab::v1::InspectReport> r = rsslab::BuildInspectReport(pid);
//   rsslab::Diagnose(&*r);
//   for (const auto& f : r->findings()) std::cout << f.summary() << "\n";
#ifndef RSSLAB_CTL_INSPECT_RULES_H_
#define RSSLAB_CTL_INSPECT_RULES_H_

#include <cstdint>

#include "proto/inspect.pb.h"

namespace rsslab {

// glibc_arenas fires from this many thread-arena heaps up, holding at
// least this much resident between them (a few idle arenas of a thread
// pool hold next to nothing).
inline constexpr int kManyArenas = 8;
inline constexpr int64_t kArenaResidentBytes = 16 << 20;
// executor_batches fires from this many batches of the default size up: one
// full default pool is what any program using asyncio.to_thread has.
inline constexpr int kExecutorBatches = 2;
// retained_heap fires when this much of the brk heap's free chunks is
// resident whole pages (what malloc_trim(0) gives back), and at least this
// share of RSS.
inline constexpr int64_t kRetainedBytes = 16 << 20;
inline constexpr int kRetainedPercent = 20;

// Appends the findings to r->findings(), in order of the rules:
//   executor_batches  (leak)     batches of exactly min(32, cpus + 4) threads
//   glibc_arenas      (leak)     many glibc arenas, MALLOC_ARENA_MAX not set at start
//   openblas_idle     (waste)    OpenBLAS's pool started, all idle
//   openmp_idle       (waste)    an OpenMP/MKL team started, all idle
//   retained_heap     (waste)    free pages in glibc's brk heap a trim would give back
//   jemalloc_bg       (expected) jemalloc background_thread threads
void Diagnose(rsslab::v1::InspectReport* r);

}  // namespace rsslab

#endif  // RSSLAB_CTL_INSPECT_RULES_H_
