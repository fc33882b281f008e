// Readers and parsers for /proc/<pid>: status, smaps (classified), maps,
// environ and the per-thread comm names.
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

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

// glibc's HEAP_MAX_SIZE on 64-bit (2 * DEFAULT_MMAP_THRESHOLD_MAX): every
// thread-arena heap is a mapping of this size, aligned to it.
inline constexpr uint64_t kGlibcHeapMaxSize = 64ull << 20;
// The first heap boundary (multiple of kGlibcHeapMaxSize) at or above addr:
// where a heap starts whose rw-p part the kernel merged with a mapping below.
inline constexpr uint64_t GlibcHeapBoundaryAtOrAbove(uint64_t addr) {
  return (addr + kGlibcHeapMaxSize - 1) / kGlibcHeapMaxSize * kGlibcHeapMaxSize;
}

// A ---p mapping directly below an rw-p one counts as a thread-stack guard
// if it is at most this big (glibc's default guard is one page; callers of
// pthread_attr_setguardsize rarely go past a few pages).
inline constexpr uint64_t kMaxGuardSize = 1ull << 20;

// Returns the contents of /proc/<pid>/<name> (/proc/self/<name> for pid 0).
// `name` may contain slashes ("task/123/comm").
absl::StatusOr<std::string> ReadProcFile(int pid, absl::string_view name);

// The same contents in private anonymous memory (mmap, outside malloc),
// unmapped when the MappedText goes. Pages are only touched as written.
//   absl::StatusOr<MappedText> t = MappedText::Read(0, "smaps");
//   ClassifySmaps(t->view(), 0, &map);
class MappedText {
 public:
  static absl::StatusOr<MappedText> Read(int pid, absl::string_view name);
  MappedText() = default;
  ~MappedText();
  MappedText(MappedText&& other) noexcept;
  MappedText& operator=(MappedText&& other) noexcept;
  MappedText(const MappedText&) = delete;
  MappedText& operator=(const MappedText&) = delete;
  absl::string_view view() const { return absl::string_view(data_, size_); }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

// Parses /proc/<pid>/status text. Sizes are converted from kB to bytes.
// Fields absent from `text` are left at 0; an error if there is no VmRSS
// line (a kernel thread or a zombie has none: nothing to report).
absl::Status ParseStatus(absl::string_view text, rsslab::v1::ProcStatus* out);
absl::Status ReadStatus(int pid, rsslab::v1::ProcStatus* out);

// This process's resident bytes from /proc/self/statm: one small read, no
// status or smaps parse (a trim's before/after figures, the automatic trim's
// samples five times a second). -1 if unreadable.
int64_t StatmRssBytes();

// Classifies every mapping of /proc/<pid>/smaps text into exactly one class,
// so the classes' RSS adds up to rss_bytes. In order of precedence:
//   heap    [heap], the brk heap (glibc's main arena).
//   arena   an anonymous rw-p mapping that holds one 64 MiB aligned address
//           and whose contiguous anonymous ---p mappings after it end at the
//           next 64 MiB boundary (or that ends on it itself): glibc reserves
//           each thread-arena heap that way and mprotects it rw as it grows.
//           Its ---p tail belongs to the class too (RSS 0). The kernel merges
//           adjacent rw-p mappings, so one may also hold the top of a thread
//           stack mapped right below the heap (its RSS counted as the
//           arena's); one spanning more than one boundary is not taken for a
//           heap (other allocators reserve large rw-p ranges). arena_count counts
//           heaps: an arena that outgrew one 64 MiB heap counts once per
//           heap, as malloc_info's "subheaps". arena_size_bytes is the rw-p
//           (usable) part, without the tail.
//   stack   [stack], and an anonymous rw-p mapping directly preceded by an
//           anonymous ---p guard of at most kMaxGuardSize (how glibc lays out
//           pthread stacks; verified on a 48-thread python3). The guard
//           itself is counted under anon (RSS 0).
//   special [vdso], [vvar], [vvar_vclock], [vsyscall] and any other
//           bracketed kernel name, and shared memory: shared ('s') mappings of
//           /dev/zero, /SYSV*, /memfd:*, /dev/shm/*, plus [anon_shmem:*].
//   file    any other mapping with a path (private dirty pages of a file
//           mapping stay here although smaps counts them as Anonymous).
//   anon    everything else anonymous: mmap'd malloc chunks, other
//           allocators' segments, guard pages, [anon:name] mappings.
// anon_mappings counts heap + arena + stack + anon mappings; mappings counts
// all. rss_bytes/anon_rss_bytes/swap_bytes sum Rss:, Anonymous:, Swap:.
// detail_top_n > 0 keeps the N largest mappings by RSS in `largest` (kind is
// the class name above). Malformed lines are skipped, never fatal: smaps is
// produced by the kernel and may grow new fields.
void ClassifySmaps(absl::string_view smaps, int detail_top_n,
                   rsslab::v1::MemoryMap* out);
absl::Status ReadSmaps(int pid, int detail_top_n, rsslab::v1::MemoryMap* out);

// The allocator mapped into a process.
struct MappedAllocator {
  std::string name;     // glibc | jemalloc | mimalloc | tcmalloc
  std::string library;  // path as mapped (symlinks resolved by the kernel,
                        // e.g. .../libmimalloc.so.2.0); libc's path for glibc
};

// Finds the allocator library in /proc/<pid>/maps text: a mapping whose file
// name starts with libjemalloc, libmimalloc or libtcmalloc (any gperftools
// flavour: _minimal, _and_profiler, _debug). If several are mapped the first
// in that order wins; with none, glibc (library: the mapped libc, or "").
MappedAllocator DetectAllocator(absl::string_view maps_text);

// True if some mapping's path in maps (or smaps) text contains `substring`.
// Only the path column is searched, so hex addresses never match.
bool IsMapped(absl::string_view maps_text, absl::string_view substring);

// The path of the first mapping whose file name (basename) starts with
// `prefix` and, if `contains` is not empty, also contains it; "" if none.
//   MappedPath(maps, "libopenblas")  // ".../libopenblasp-r0.3.21.so"
//   MappedPath(maps, "_rsslab", ".so")
std::string MappedPath(absl::string_view maps_text, absl::string_view prefix,
                       absl::string_view contains = "");
// The path of the first mapping for which match(path) is true; "" if none.
std::string FirstMappedPath(absl::string_view maps_text,
                            absl::FunctionRef<bool(absl::string_view path)> match);

// Parses /proc/<pid>/environ (NUL-separated NAME=value): the environment the
// process was started with, not what it has setenv()ed since. If a name
// repeats, the first wins, as for getenv(3).
std::map<std::string, std::string> ParseEnviron(absl::string_view text);
absl::StatusOr<std::map<std::string, std::string>> ReadEnviron(int pid);

// Keeps the variables that change how memory is allocated: LD_PRELOAD,
// GLIBC_TUNABLES, MALLOC_* (MALLOC_ARENA_MAX, MALLOC_CONF, MALLOC_TRIM_
// THRESHOLD_, ...), JE_MALLOC_CONF, _RJEM_MALLOC_CONF, MIMALLOC_*,
// TCMALLOC_*, PYTHONMALLOC*.
std::map<std::string, std::string> AllocatorEnv(
    const std::map<std::string, std::string>& env);

// AllocatorEnv(ReadEnviron(pid)) without building the whole environment:
// only the kept variables are copied out of the (mmapped) text.
absl::StatusOr<std::map<std::string, std::string>> ReadAllocatorEnv(int pid);

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

// "0-3,8,10-11" -> 7 (Cpus_allowed_list). -1 if malformed.
int CountCpuList(absl::string_view list);

// The value of a "Key:\tvalue" line of /proc/PID/status text, trimmed
// ("" if absent), e.g. StatusField(text, "Cpus_allowed_list").
absl::string_view StatusField(absl::string_view status_text, absl::string_view key);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_PROCFS_H_
