// snapshot_cost: what one full snapshot (ServerCore::TakeSnapshot, the work
// behind Control.GetSnapshot: status, thread census, smaps classification,
// environ, allocator stats with malloc_info, Python info, counters) costs in
// time, in bytes allocated through malloc, and in RSS.
//
//   snapshot_cost --threads=64 --handler=server/handlers/web_worker.py
//
// This binary defines malloc, calloc, realloc, free and the aligned
// variants itself; they count and forward to glibc's (__libc_malloc ...),
// so every allocation of the process, on any thread, passes through the
// counters. The server core is the real one (same library as
// rsslab_server): N worker threads attach to the interpreter and serve
// --warm_requests handler calls first, so glibc gives them arenas and the
// arenas hold something, as in a server after load. Then K snapshots are
// taken back to back while the workers are idle; each is timed and its
// malloc traffic counted. Prints key=value lines.

#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/snapshot.pb.h"
#include "server/core.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {

// Counting is on only inside the measured window; relaxed atomics are enough
// (the window is bracketed by the measuring thread's own calls).
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_calls{0};      // malloc/calloc/realloc/memalign calls
std::atomic<int64_t> g_bytes{0};      // bytes requested by those calls
std::atomic<int64_t> g_frees{0};
std::atomic<int64_t> g_net{0};        // usable bytes allocated - freed
std::atomic<int64_t> g_largest{0};    // largest single request

void Count(void* p, size_t requested) {
  if (p == nullptr || !g_counting.load(std::memory_order_relaxed)) return;
  g_calls.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(static_cast<int64_t>(requested), std::memory_order_relaxed);
  g_net.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  int64_t prev = g_largest.load(std::memory_order_relaxed);
  while (static_cast<int64_t>(requested) > prev &&
         !g_largest.compare_exchange_weak(prev, static_cast<int64_t>(requested))) {
  }
}

void CountFree(void* p) {
  if (p == nullptr || !g_counting.load(std::memory_order_relaxed)) return;
  g_frees.fetch_add(1, std::memory_order_relaxed);
  g_net.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}

}  // namespace

extern "C" {
void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  Count(p, n);
  return p;
}
void* calloc(size_t n, size_t m) {
  void* p = __libc_calloc(n, m);
  Count(p, n * m);
  return p;
}
void* realloc(void* old, size_t n) {
  CountFree(old);
  void* p = __libc_realloc(old, n);
  Count(p, n);
  return p;
}
void free(void* p) {
  CountFree(p);
  __libc_free(p);
}
void* memalign(size_t align, size_t n) {
  void* p = __libc_memalign(align, n);
  Count(p, n);
  return p;
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
void* valloc(size_t n) { return memalign(static_cast<size_t>(getpagesize()), n); }
}  // extern "C"

ABSL_FLAG(int, threads, 64, "Worker threads of the server core.");
ABSL_FLAG(std::string, handler, "server/handlers/web_worker.py", "Handler file.");
ABSL_FLAG(int, warm_requests, 2000, "Handler calls served before measuring.");
ABSL_FLAG(int, snapshots, 50, "Snapshots measured.");
ABSL_FLAG(bool, gc, false, "Snapshots with gc.collect() first (GetSnapshot's gc=true).");

namespace {

int64_t StatusKb(const char* key) {
  FILE* f = fopen("/proc/self/status", "re");
  if (f == nullptr) return -1;
  char line[256];
  int64_t v = -1;
  size_t len = strlen(key);
  while (fgets(line, sizeof(line), f) != nullptr) {
    if (strncmp(line, key, len) == 0) {
      v = strtoll(line + len, nullptr, 10);
      break;
    }
  }
  fclose(f);
  return v;
}

// CPU time of the whole process: the snapshot runs on the calling thread
// and the Python control thread while the workers sit idle, so this is the
// snapshot's CPU, unlike wall time unaffected by other processes' load.
double ProcessCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// Whether a malloc of `kib` KiB is served by mmap now, i.e. glibc's mmap
// threshold is still below it. Freeing a large mmapped chunk raises the
// process-wide mmap threshold to that chunk's size (and the trim threshold
// to twice that), so a snapshot that malloc'd and freed a 1 MiB buffer
// would change how the measured process allocates from then on. The probe's
// own free raises the threshold to just above `kib`, so each probe must ask
// for more than the one before.
bool LargeMallocIsMmapped(size_t kib) {
  size_t before = mallinfo2().hblks;
  void* volatile p = __libc_malloc(kib << 10);
  bool mmapped = mallinfo2().hblks > before;
  __libc_free(p);
  return mmapped;
}

// A server core after load: phase fill, then --warm_requests handler calls,
// so each worker gets (and fills) an arena. *errors counts failed calls.
absl::Status Warm(rsslab::ServerCore& core, int* errors) {
  rsslab::SetPhaseCall fill;
  fill.phase = rsslab::v1::PHASE_FILL;
  fill.cache_limit_bytes = rsslab::kDefaultFillCacheBytes;
  fill.gc = false;
  rsslab::v1::SetPhaseResponse fill_resp;
  absl::Status s = core.control()->SetPhase(fill, &fill_resp,
                                            /*python_deadline=*/absl::InfiniteDuration());
  if (!s.ok()) return s;
  const int warm = absl::GetFlag(FLAGS_warm_requests);
  std::vector<rsslab::v1::HandleRequest> reqs(warm);
  std::vector<rsslab::v1::HandleResponse> resps(warm);
  absl::BlockingCounter pending(warm);
  std::atomic<int> failed{0};
  for (int i = 0; i < warm; ++i) {
    reqs[i].set_id(i);
    reqs[i].set_seed(i);
    core.Submit(&reqs[i], &resps[i], nullptr, [&](const absl::Status& s) {
      if (!s.ok()) failed.fetch_add(1);
      pending.DecrementCount();
    });
  }
  pending.Wait();
  *errors = failed.load();
  return absl::OkStatus();
}

struct Measured {
  std::vector<double> ms, cpu_ms;
  std::vector<int64_t> bytes, calls;
  int64_t max_net = 0, max_largest = 0;
};

// k snapshots back to back, each timed and its malloc traffic counted.
Measured MeasureSnapshots(rsslab::ServerCore& core, const rsslab::ServerCore::SnapshotOptions& so,
                          int k) {
  Measured m;
  for (int i = 0; i < k; ++i) {
    g_calls = 0;
    g_bytes = 0;
    g_frees = 0;
    g_net = 0;
    g_largest = 0;
    auto snap = std::make_unique<rsslab::v1::Snapshot>();
    g_counting = true;
    double c0 = ProcessCpuMs();
    absl::Time t0 = absl::Now();
    core.TakeSnapshot(so, snap.get());
    absl::Duration took = absl::Now() - t0;
    m.cpu_ms.push_back(ProcessCpuMs() - c0);
    // GetSnapshot serialises the message and frees it: its destruction is
    // inside the window, so net bytes are what a snapshot leaves behind.
    snap.reset();
    g_counting = false;
    m.ms.push_back(absl::ToDoubleMilliseconds(took));
    m.bytes.push_back(g_bytes.load());
    m.calls.push_back(g_calls.load());
    m.max_net = std::max(m.max_net, g_net.load());
    m.max_largest = std::max(m.max_largest, g_largest.load());
  }
  return m;
}

template <typename V>
double Mean(const V& v) {
  double s = 0;
  for (auto x : v) s += static_cast<double>(x);
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

void PrintTimes(const Measured& m) {
  printf("time_ms_mean=%.3f\n", Mean(m.ms));
  printf("time_ms_max=%.3f\n", *std::max_element(m.ms.begin(), m.ms.end()));
  std::vector<double> sorted = m.ms;
  std::sort(sorted.begin(), sorted.end());
  printf("time_ms_median=%.3f\n", sorted[sorted.size() / 2]);
  printf("cpu_ms_mean=%.3f\n", Mean(m.cpu_ms));
  printf("malloc_bytes_mean=%.0f\n", Mean(m.bytes));
  printf("malloc_bytes_max=%ld\n",
         static_cast<long>(*std::max_element(m.bytes.begin(), m.bytes.end())));
  printf("malloc_calls_mean=%.1f\n", Mean(m.calls));
  printf("malloc_largest_request=%ld\n", static_cast<long>(m.max_largest));
  printf("malloc_net_bytes_max=%ld\n", static_cast<long>(m.max_net));
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  rsslab::ServerCore::Options o;
  o.threads = absl::GetFlag(FLAGS_threads);
  o.handler_path = absl::GetFlag(FLAGS_handler);
  const int k = absl::GetFlag(FLAGS_snapshots);
  const int warm = absl::GetFlag(FLAGS_warm_requests);
  if (k < 1 || k > 100000 || warm < 0 || warm > 10000000) {
    fprintf(stderr, "snapshot_cost: --snapshots must be 1..100000, --warm_requests 0..10000000\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<rsslab::ServerCore>> core = rsslab::ServerCore::Create(o);
  if (!core.ok()) {
    fprintf(stderr, "snapshot_cost: %s\n", std::string(core.status().message()).c_str());
    return 1;
  }
  // Before anything takes a snapshot (SetPhase takes one).
  const bool mmapped_before = LargeMallocIsMmapped(200);
  int errors = 0;
  if (absl::Status s = Warm(**core, &errors); !s.ok()) {
    fprintf(stderr, "snapshot_cost: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  rsslab::ServerCore::SnapshotOptions so;
  so.gc = absl::GetFlag(FLAGS_gc);
  // One unmeasured snapshot: first-use costs (lazy dlsym, protobuf
  // descriptors, Python's cached attribute lookups) are not per snapshot.
  rsslab::v1::Snapshot first;
  (*core)->TakeSnapshot(so, &first);
  const bool mmapped_after_first = LargeMallocIsMmapped(300);
  const int64_t rss_before = StatusKb("VmRSS:");
  const int64_t anon_before = StatusKb("RssAnon:");
  const int64_t heap_before = static_cast<int64_t>(mallinfo2().arena);
  const Measured m = MeasureSnapshots(**core, so, k);
  const int64_t rss_after = StatusKb("VmRSS:");
  const int64_t anon_after = StatusKb("RssAnon:");
  const int64_t heap_after = static_cast<int64_t>(mallinfo2().arena);
  const bool mmapped_after = LargeMallocIsMmapped(400);

  printf("threads=%d\n", o.threads);
  printf("os_threads=%d\n", first.status().threads());
  printf("arenas_smaps=%d\n", first.memory_map().arena_count());
  printf("arenas_malloc_info=%d\n", first.allocator_stats().glibc().malloc_info_arenas());
  printf("mappings=%d\n", first.memory_map().mappings());
  printf("warm_errors=%d\n", errors);
  printf("snapshots=%d gc=%d\n", k, so.gc ? 1 : 0);
  PrintTimes(m);
  printf("rss_kb_before=%ld\n", static_cast<long>(rss_before));
  printf("rss_kb_after=%ld\n", static_cast<long>(rss_after));
  printf("rss_kb_change=%ld\n", static_cast<long>(rss_after - rss_before));
  printf("rss_anon_kb_change=%ld\n", static_cast<long>(anon_after - anon_before));
  // 1 = still served by mmap: glibc's thresholds were not raised (by the
  // first snapshot, or by the measured ones); the handler's own large
  // allocations (web_worker) raise them too.
  printf("large_malloc_mmapped_before_first_measured=%d/%d/%d\n", mmapped_before ? 1 : 0,
         mmapped_after_first ? 1 : 0, mmapped_after ? 1 : 0);
  printf("main_arena_kb_change=%ld\n", static_cast<long>((heap_after - heap_before) / 1024));
  (*core)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
