// The threads of /proc/<pid>/task: a census by name, and a walk over each
// thread's comm, stat and wchan that allocates nothing.
//
// Example:
//
//   rsslab::procfs::ForEachThread(pid, rsslab::procfs::kThreadStat,
//                                 [](const rsslab::procfs::ThreadView& t) {
//                                   // t.tid, t.state, t.comm
//                                 });
#ifndef RSSLAB_COMMON_PROCFS_THREADS_H_
#define RSSLAB_COMMON_PROCFS_THREADS_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

// Counts threads per /proc/<pid>/task/*/comm, sorted by count descending,
// then name. Threads that exit while being counted are skipped. Built on
// ForEachThread (comm only).
absl::Status ThreadCensus(
    int pid, google::protobuf::RepeatedPtrField<rsslab::v1::ThreadName>* out);

// One thread of /proc/<pid>/task/<tid>, as ForEachThread hands it over. The
// views point into ForEachThread's stack buffers: copy what you keep.
struct ThreadView {
  int tid = 0;
  char state = '?';            // stat field 3: R S D I T t Z X ...
  int ppid = 0;                // stat field 4: the parent's pid
  uint64_t minflt = 0;         // stat field 10: minor faults (the process's, in /proc/PID/stat)
  uint64_t start_ticks = 0;    // stat field 22: clock ticks after boot
  uint32_t flags = 0;          // stat field 9 (PF_KTHREAD = 0x00200000)
  absl::string_view comm;      // at most 15 bytes (TASK_COMM_LEN - 1)
  absl::string_view wchan;     // with kThreadWchan: kernel function, or "0"
};

// What ForEachThread reads per thread (one open/read/close each):
//   kThreadComm   task/TID/comm only (the census: cheapest)
//   kThreadStat   task/TID/stat: state, start time, flags and comm
//   kThreadWchan  task/TID/wchan too ("0" when the kernel hides it)
enum ThreadFields : int { kThreadComm = 1, kThreadStat = 2, kThreadWchan = 4 };

// Counters of one ForEachThread pass.
struct ThreadScan {
  int listed = 0;    // task/ entries seen
  int vanished = 0;  // exited between the listing and the read: skipped
  bool truncated = false;  // stopped at max_threads
};

// Calls fn once per thread of `pid`, in task/ order. Time is one getdents64
// per ~100 threads plus one small read per field per thread; memory is fixed
// (4 KiB directory buffer, 1 KiB per field on the stack, nothing on the heap),
// so 10,000 threads cost ~10k syscalls per field and no allocation. Stops
// after max_threads threads (scan->truncated). Errors: the task directory
// cannot be opened (no such pid, no permission).
absl::Status ForEachThread(int pid, int fields,
                           absl::FunctionRef<void(const ThreadView&)> fn,
                           ThreadScan* scan = nullptr, int max_threads = 1 << 22);

// Parses one /proc/PID/stat or task/TID/stat line into tid, comm, state,
// flags and start_ticks (the comm may hold spaces and parentheses: the last
// ')' ends it). False if the line is not a stat line.
bool ParseThreadStat(absl::string_view line, ThreadView* out);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_THREADS_H_
