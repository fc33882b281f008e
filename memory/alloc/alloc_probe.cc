// alloc_probe: reports on whichever allocator serves this process (run it
// with LD_PRELOAD=<allocator>.so) and shows what its release calls give back.
//
// A worker thread allocates 64 MiB in 16 KiB blocks and frees all but every
// 32nd (so the memory is fragmented: nothing a plain free() could return by
// shrinking a heap top), then stays alive. The main thread runs the global
// release; then the worker runs the per-thread release on its own heap, and
// the main thread the allocator's once-after-all-threads release. The
// RSS and the allocator's own resident figure are printed after each step as
// key=value lines; stats_* lines are AllocatorStats in text format.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "proto/snapshot.pb.h"
#include "memory/alloc/alloc.h"
#include "common/procfs/procfs.h"

namespace {

constexpr size_t kBlock = 16 << 10;
constexpr size_t kBlocks = 4096;  // 64 MiB
constexpr size_t kKeepEvery = 32;

int64_t Rss() {
  rsslab::v1::ProcStatus s;
  return rsslab::procfs::ReadStatus(0, &s).ok() ? s.rss_bytes() : -1;
}

void Report(const char* step) {
  std::printf("rss_%s=%lld\n", step, static_cast<long long>(Rss()));
  std::printf("resident_%s=%lld\n", step,
              static_cast<long long>(rsslab::alloc::Allocator::Get().ResidentBytes()));
}

void Stats(const char* step) {
  rsslab::v1::AllocatorStats stats;
  rsslab::alloc::Allocator::Get().FillStats(&stats);
  std::printf("stats_%s=%s\n", step, stats.ShortDebugString().c_str());
}

}  // namespace

// Usage: alloc_probe [IDLE_MS]. IDLE_MS (default 0) is how long the worker
// stays idle between the free and the releases, like the idle phase of the
// experiment: delay-based decommit (mimalloc's decommit_delay) needs it.
int main(int argc, char** argv) {
  const int idle_ms = argc > 1 ? std::atoi(argv[1]) : 0;
  const rsslab::alloc::Allocator& a = rsslab::alloc::Allocator::Get();
  std::printf("name=%s\nlibrary=%s\n", a.name().c_str(), a.library().c_str());
  Stats("start");

  absl::Notification freed, release_thread, released_thread;
  std::vector<char*> kept;
  std::thread worker([&] {
    std::vector<char*> blocks(kBlocks);
    for (size_t i = 0; i < kBlocks; ++i) {
      blocks[i] = static_cast<char*>(malloc(kBlock));
      std::memset(blocks[i], 0x5a, kBlock);  // make it resident
    }
    Report("allocated");
    for (size_t i = 0; i < kBlocks; ++i) {
      if (i % kKeepEvery == 0) {
        kept.push_back(blocks[i]);
      } else {
        free(blocks[i]);
      }
    }
    if (idle_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    }
    freed.Notify();
    release_thread.WaitForNotification();
    rsslab::alloc::Allocator::Release r = a.ReleaseThisThread();
    std::printf("thread_call=%s\nthread_ret=%d\n", r.call.c_str(), r.ret);
    Report("after_thread");
    released_thread.Notify();
  });

  freed.WaitForNotification();
  Report("after_free");
  Stats("after_free");
  rsslab::alloc::Allocator::Release r = a.ReleaseGlobal();
  std::printf("global_call=%s\nglobal_ret=%d\n", r.call.c_str(), r.ret);
  Report("after_global");
  release_thread.Notify();
  released_thread.WaitForNotification();
  r = a.ReleaseAfterThreads();
  std::printf("after_threads_call=%s\nafter_threads_ret=%d\n", r.call.c_str(), r.ret);
  Report("after_threads");
  worker.join();
  // A trim's override of a timer-deferred release, and its restore.
  const rsslab::alloc::Allocator::DelayOverride o = a.OverrideReleaseDelay();
  std::printf("delay_option=%s\ndelay_applied=%d\ndelay_before=%lld\ndelay_during=%lld\n",
              o.option.c_str(), o.applied ? 1 : 0, static_cast<long long>(o.before),
              static_cast<long long>(o.during));
  std::printf("delay_after=%lld\n", static_cast<long long>(a.RestoreReleaseDelay(o)));
  Stats("end");
  for (char* p : kept) free(p);
  std::fflush(stdout);
  return 0;
}
