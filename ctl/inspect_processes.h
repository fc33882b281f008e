// The processes and pools of an inspected process, for BuildInspectReport
// (inspect.h): pools told by their threads' names, child processes and the
// process model (pre-fork masters and their workers). Each reads /proc only
// and fills its part of the report. See docs/INSPECT.md.
//
// Example (inside BuildInspectReport, after the threads are read):
//   RecognizeNamedPools(&r);
//   ReadChildren(pid, &r);
#ifndef RSSLAB_CTL_INSPECT_PROCESSES_H_
#define RSSLAB_CTL_INSPECT_PROCESSES_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
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

}  // namespace rsslab

#endif  // RSSLAB_CTL_INSPECT_PROCESSES_H_
