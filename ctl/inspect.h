// Inspects any process from outside, through /proc only: its threads (by
// name, by wait state, in creation batches), its memory (the server
// snapshot's classified smaps), its allocator and start environment, its
// Python version and whether the rsslab package is loaded; then states a
// diagnosis (inspect_rules.h). Nothing runs inside the target. See
// docs/INSPECT.md.
//
// Example:
//   absl::StatusOr<rsslab::v1::InspectReport> r = rsslab::BuildInspectReport(pid);
//   if (!r.ok()) return Die(r.status());      // no such pid, kernel thread, no permission
//   rsslab::Diagnose(&*r);                     // fills r->findings()
//   std::cout << rsslab::InspectText(*r);
//   // r->partial(): the process exited (or hid a file) while being read
#ifndef RSSLAB_CTL_INSPECT_H_
#define RSSLAB_CTL_INSPECT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/inspect.pb.h"

namespace rsslab {

struct InspectOptions {
  // Threads started at most this far apart (chained) form one batch.
  absl::Duration batch_window = absl::Milliseconds(50);
  // Threads examined at most; past this the report is marked partial.
  // Bounds the inspector's memory (~48 bytes a thread).
  int max_threads = 200000;
  // Batches kept in the report (the rest are counted in the last one's
  // place: the report says how many were dropped).
  int max_batches = 1000;
  // Largest mappings kept from smaps.
  int top_mappings = 5;
  // Longest walk of glibc's heaps (glibc_heap_walk.h WalkGlibcHeaps).
  absl::Duration heap_walk_budget = absl::Seconds(2);
};

// Reads everything the report holds. Errors (one line each, meant for the
// user as is): NotFound (no such process), FailedPrecondition (a kernel
// thread or a zombie: no memory to inspect), PermissionDenied (another
// user's process: its maps, smaps and environ need ptrace-read access).
// A process that exits, or hides a file, after the first read yields a
// report with partial set and partial_reasons saying what is missing.
absl::StatusOr<rsslab::v1::InspectReport> BuildInspectReport(
    int pid, const InspectOptions& options = InspectOptions());

// One --watch sample: RSS, threads and arenas (status + smaps only). The
// figures read are also left in *status and *map when given.
absl::StatusOr<rsslab::v1::InspectSample> TakeInspectSample(
    int pid, rsslab::v1::ProcStatus* status = nullptr, rsslab::v1::MemoryMap* map = nullptr);

// The default pool size of Python's ThreadPoolExecutor: min(32, cpus + 4).
inline int DefaultExecutorWorkers(int cpus) { return cpus + 4 < 32 ? cpus + 4 : 32; }

// "3.11" from an executable or library path ("/usr/bin/python3.11",
// ".../libpython3.12.so.1.0", ".../python3.11/lib-dynload/_ssl...so");
// "" if none.
std::string PythonVersionFromPath(absl::string_view path);

// The Control address file the rsslab package's serve() writes (the
// contract in docs/INSPECT.md): DIR/rsslab-control-PID.addr.
std::string ControlAddressFile(absl::string_view dir, int pid);

// Renders the report for people (findings first, then the evidence).
std::string InspectText(const rsslab::v1::InspectReport& r);
// One line per watch sample.
std::string InspectSampleLine(const rsslab::v1::InspectSample& s);

}  // namespace rsslab

#endif  // RSSLAB_CTL_INSPECT_H_
