// Parts of BuildInspectReport (inspect.h) kept apart from the main reads:
// pools told by their threads' names, child processes and the process
// model (pre-fork masters and their workers), and the walk of glibc's brk
// heap. Each reads /proc only and fills its part of the report. See
// docs/INSPECT.md.
//
// Example (inside BuildInspectReport, after the threads are read):
//   RecognizeNamedPools(&r);
//   ReadChildren(pid, &r);
//   WalkGlibcHeaps(pid, maps_text, r.mutable_heap_walk());
#ifndef RSSLAB_CONTROL_INSPECT_PARTS_H_
#define RSSLAB_CONTROL_INSPECT_PARTS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/inspect.pb.h"

namespace rsslab {

// Children listed at most (the rest only counted in children_total).
inline constexpr int kMaxChildren = 64;

// The first 256 bytes of /proc/PID/cmdline, NULs as spaces; "" if unreadable.
std::string Cmdline(int pid);

// Pools by their threads' names, from r->by_comm(): concurrent.futures'
// "ThreadPoolExecutor-N_M" (one pool per N; grpcio's server pool and
// gunicorn's gthread workers are these), its 15-byte cut
// "ThreadPoolExecu" (executors not told apart), asyncio's default
// executors "asyncio_M" (one executor per "asyncio_0"), and any
// thread_name_prefix "PREFIX_M" with a worker 0 or two workers or more.
void RecognizeNamedPools(rsslab::v1::InspectReport* r);

// "gunicorn master", "gunicorn worker", "uvicorn master", "uvicorn worker",
// "pre-fork master" or "": from the process's comm and command line (as
// setproctitle leaves it, "gunicorn: worker [app]", or as started), its
// parent's comm, and how many children run the same executable.
std::string ProcessModel(absl::string_view comm, absl::string_view cmdline,
                         absl::string_view parent_comm, int same_exe_children);

// The ppid (field 4) of a /proc/PID/stat line; -1 if malformed.
int ParentPid(absl::string_view stat_line);

// Fills r->children (at most kMaxChildren, oldest first), children_total
// and process_model, scanning /proc/*/stat for parent `pid`.
void ReadChildren(int pid, rsslab::v1::InspectReport* r);

// Walks glibc's heaps chunk by chunk through /proc/PID/mem: the brk heap
// (the [heap] line of `maps`) and every thread-arena heap (64 MiB aligned,
// its heap_info checked), and counts the resident pages inside free chunks
// from /proc/PID/pagemap: what malloc_trim(0) would give back. Needs ptrace
// access (root, or the same user where ptrace is allowed); without it, or
// for a layout that is not glibc's, out->walked stays false and out->note
// says why (an arena heap that does not chain is left out of the arena
// figures). Stops after `budget` (out->note says so).
void WalkGlibcHeaps(int pid, absl::string_view maps, rsslab::v1::HeapWalk* out,
                    absl::Duration budget = absl::Seconds(2));

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_INSPECT_PARTS_H_
