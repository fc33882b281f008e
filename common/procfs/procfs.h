// Readers and parsers for /proc/<pid>, one header per file read: status.h
// (status, statm), smaps.h (classified smaps), maps.h (allocator detection,
// mapped paths), environ.h, threads.h (census, per-thread walk), and
// proc_file.h (one file, in memory outside the heap). This header includes
// them all, for callers that use several.
//
// Example:
//
//   rsslab::v1::ProcStatus status;
//   absl::Status s = rsslab::procfs::ReadStatus(/*pid=*/0, &status);  // self
//
//   rsslab::v1::MemoryMap map;
//   s = rsslab::procfs::ReadSmaps(0, /*detail_top_n=*/5, &map);
//   // map.arena_count(): glibc thread-arena heaps; map.stack_count(): stacks
//
//   absl::StatusOr<std::string> maps = rsslab::procfs::ReadProcFile(pid, "maps");
//   rsslab::procfs::MappedAllocator a = rsslab::procfs::DetectAllocator(*maps);
//   // a.name == "jemalloc", a.library == "/usr/lib/.../libjemalloc.so.2"
//
//   auto env = rsslab::procfs::ReadEnviron(pid);  // what the process started with
//   auto alloc_env = rsslab::procfs::AllocatorEnv(*env);
//
// Every function taking a pid treats 0 as "this process" (/proc/self) and
// works for any other pid the caller may read (same user or root; environ
// needs ptrace-read permission).
//
// The readers a snapshot uses (status, smaps, environ, the thread census)
// read with open/read(2) into private anonymous memory (MappedText), never
// the malloc heap, and parse string_views into it: smaps of a 64-thread
// process is ~0.6 MB, and a heap buffer that size would grow the heap being
// measured or, once freed from mmap, raise glibc's dynamic mmap threshold.
// bench/snapshot_cost.sh measures what a snapshot still allocates.
#ifndef RSSLAB_COMMON_PROCFS_PROCFS_H_
#define RSSLAB_COMMON_PROCFS_PROCFS_H_

#include "common/procfs/environ.h"    // IWYU pragma: export
#include "common/procfs/maps.h"       // IWYU pragma: export
#include "common/procfs/proc_file.h"  // IWYU pragma: export
#include "common/procfs/smaps.h"      // IWYU pragma: export
#include "common/procfs/status.h"     // IWYU pragma: export
#include "common/procfs/threads.h"    // IWYU pragma: export

#endif  // RSSLAB_COMMON_PROCFS_PROCFS_H_
