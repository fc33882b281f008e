// Tests against /proc files captured from real processes (testdata/, see
// testdata/capture.py) and against this live process. The expected numbers
// were worked out independently of this code, with testdata/check_smaps.awk
// and grep over the fixtures.
#include "common/procfs/procfs.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace rsslab {
namespace procfs {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

constexpr int64_t kKiB = 1024;

std::string Fixture(const std::string& name) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  EXPECT_NE(runfiles, nullptr) << error;
  if (runfiles == nullptr) return "";
  std::ifstream in(runfiles->Rlocation("rsslab/common/procfs/testdata/" + name),
                   std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A python3 with 48 threads under PYTHONMALLOC=malloc: glibc with 15
// thread arenas (malloc_info shows 16 heaps, nr 0 being the main arena).
TEST(ParseStatusTest, ManyArenaPython) {
  v1::ProcStatus s;
  ASSERT_TRUE(ParseStatus(Fixture("py_arenas.status"), &s).ok());
  EXPECT_EQ(s.rss_bytes(), 268032 * kKiB);
  EXPECT_EQ(s.hwm_bytes(), 268192 * kKiB);
  EXPECT_EQ(s.anon_bytes(), 261608 * kKiB);
  EXPECT_EQ(s.file_bytes(), 6424 * kKiB);
  EXPECT_EQ(s.shmem_bytes(), 0);
  EXPECT_EQ(s.vm_size_bytes(), 1416760 * kKiB);
  EXPECT_EQ(s.vm_data_bytes(), 658568 * kKiB);
  EXPECT_EQ(s.swap_bytes(), 0);
  EXPECT_EQ(s.threads(), 49);
}

TEST(ParseStatusTest, Jemalloc) {
  v1::ProcStatus s;
  ASSERT_TRUE(ParseStatus(Fixture("py_jemalloc.status"), &s).ok());
  EXPECT_EQ(s.rss_bytes(), 59268 * kKiB);
  EXPECT_EQ(s.anon_bytes(), 51468 * kKiB);
  EXPECT_EQ(s.threads(), 13);
}

TEST(ParseStatusTest, RejectsTextWithoutVmRss) {
  v1::ProcStatus s;
  EXPECT_FALSE(ParseStatus("", &s).ok());
  EXPECT_FALSE(ParseStatus("Name:\tkthreadd\nThreads:\t1\n", &s).ok());
  EXPECT_FALSE(ParseStatus("VmRSS:\tlots kB\n", &s).ok());
  EXPECT_TRUE(ParseStatus("VmRSS:   12 kB", &s).ok());  // no final newline
  EXPECT_EQ(s.rss_bytes(), 12 * kKiB);
}

int64_t ClassSum(const v1::MemoryMap& m) {
  return m.heap_rss_bytes() + m.arena_rss_bytes() + m.stack_rss_bytes() +
         m.other_anon_rss_bytes() + m.file_rss_bytes() + m.special_rss_bytes();
}

TEST(ClassifySmapsTest, ManyArenaPython) {
  v1::MemoryMap m;
  ClassifySmaps(Fixture("py_arenas.smaps"), 3, &m);
  EXPECT_EQ(m.mappings(), 203);
  EXPECT_EQ(m.rss_bytes(), 268032 * kKiB);  // == VmRSS of the status fixture
  EXPECT_EQ(m.anon_rss_bytes(), 261608 * kKiB);
  EXPECT_EQ(m.swap_bytes(), 0);
  EXPECT_EQ(m.heap_rss_bytes(), 18956 * kKiB);
  EXPECT_EQ(m.arena_count(), 15);
  EXPECT_EQ(m.arena_rss_bytes(), 231412 * kKiB);
  EXPECT_EQ(m.arena_size_bytes(), 234704 * kKiB);
  EXPECT_EQ(m.stack_count(), 49);  // 48 threads + the main [stack]
  EXPECT_EQ(m.stack_rss_bytes(), 456 * kKiB);
  EXPECT_EQ(m.other_anon_rss_bytes(), 9476 * kKiB);  // incl. 3 mmap'd 3 MiB
  EXPECT_EQ(m.file_rss_bytes(), 7728 * kKiB);
  EXPECT_EQ(m.special_rss_bytes(), 4 * kKiB);
  EXPECT_EQ(m.anon_mappings(), 137);
  EXPECT_EQ(ClassSum(m), m.rss_bytes());

  ASSERT_EQ(m.largest_size(), 3);
  EXPECT_EQ(m.largest(0).range(), "01184000-02407000");
  EXPECT_EQ(m.largest(0).name(), "[heap]");
  EXPECT_EQ(m.largest(0).kind(), "heap");
  EXPECT_EQ(m.largest(0).rss_bytes(), 18956 * kKiB);
  EXPECT_EQ(m.largest(1).kind(), "arena");
  EXPECT_GE(m.largest(1).rss_bytes(), m.largest(2).rss_bytes());
}

TEST(ClassifySmapsTest, JemallocHasNoGlibcArenas) {
  v1::MemoryMap m;
  ClassifySmaps(Fixture("py_jemalloc.smaps"), 1, &m);
  EXPECT_EQ(m.mappings(), 128);
  EXPECT_EQ(m.rss_bytes(), 59268 * kKiB);
  EXPECT_EQ(m.arena_count(), 0);
  EXPECT_EQ(m.arena_rss_bytes(), 0);
  EXPECT_EQ(m.heap_rss_bytes(), 0);  // no [heap]: jemalloc never calls brk here
  // 8 Python threads + 4 jemalloc_bg_thd + main.
  EXPECT_EQ(m.stack_count(), 13);
  EXPECT_EQ(m.stack_rss_bytes(), 196 * kKiB);
  EXPECT_EQ(m.other_anon_rss_bytes(), 49872 * kKiB);
  EXPECT_EQ(m.file_rss_bytes(), 9196 * kKiB);
  EXPECT_EQ(m.anon_mappings(), 47);
  EXPECT_EQ(ClassSum(m), m.rss_bytes());
  ASSERT_EQ(m.largest_size(), 1);
  EXPECT_EQ(m.largest(0).range(), "7fab842ff000-7fab86fff000");
  EXPECT_EQ(m.largest(0).kind(), "anon");
  EXPECT_EQ(m.largest(0).size_bytes(), 46080 * kKiB);
}

// A heap whose rw-p part the kernel merged with a thread stack mapped right
// below it; a rw-p range over several boundaries (another allocator's
// reservation) is no heap.
TEST(ClassifySmapsTest, HeapsMergedWithTheirNeighbours) {
  const std::string smaps =
      // A stack's guard, then its 8 MiB and a heap's first 1 MiB in one
      // rw-p mapping (the heap starts at the aligned 7f0004000000), then
      // the heap's ---p tail to the next 64 MiB boundary.
      "7f0003800000-7f0003801000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      "7f0003801000-7f0004100000 rw-p 00000000 00:00 0 \nRss:  64 kB\n"
      "7f0004100000-7f0008000000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      // An ordinary stack between guards: not a heap.
      "7f0020000000-7f0020001000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      "7f0020001000-7f0020801000 rw-p 00000000 00:00 0 \nRss:  8 kB\n"
      "7f0020801000-7f0020802000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      // 1 GiB of rw-p on 64 MiB boundaries, then a ---p run to the next.
      "7f0040000000-7f0080000000 rw-p 00000000 00:00 0 \nRss:  512 kB\n"
      "7f0080000000-7f0081000000 ---p 00000000 00:00 0 \nRss:  0 kB\n";
  v1::MemoryMap m;
  ClassifySmaps(smaps, 0, &m);
  EXPECT_EQ(m.arena_count(), 1);
  EXPECT_EQ(m.arena_rss_bytes(), 64 * kKiB);
  EXPECT_EQ(m.other_anon_rss_bytes(), 512 * kKiB);
  EXPECT_EQ(m.stack_count(), 1);
  EXPECT_EQ(m.stack_rss_bytes(), 8 * kKiB);
  EXPECT_EQ(ClassSum(m), m.rss_bytes());
}

// Edge cases the captures do not contain, as the kernel would print them.
TEST(ClassifySmapsTest, EdgeCases) {
  const std::string smaps =
      // A heap grown to the full 64 MiB: no ---p tail, still an arena.
      "7f0000000000-7f0004000000 rw-p 00000000 00:00 0 \nRss:  100 kB\n"
      // A thread stack whose usable part happens to be 64 MiB aligned: the
      // guard before it makes it a stack, and its 8 MiB + next guard do not
      // span 64 MiB.
      "7f0007fff000-7f0008000000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      "7f0008000000-7f0008800000 rw-p 00000000 00:00 0 \nRss:  8 kB\n"
      "7f0008800000-7f0008801000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      // An arena heap with a tail split in two ---p mappings.
      "7f000c000000-7f000c100000 rw-p 00000000 00:00 0 \nRss:  40 kB\n"
      "7f000c100000-7f000e000000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      "7f000e000000-7f0010000000 ---p 00000000 00:00 0 \nRss:  0 kB\n"
      // Right after an arena tail: not a stack (the tail is not a guard).
      "7f0010000000-7f0010001000 rw-p 00000000 00:00 0 \nRss:  4 kB\n"
      // Shared memory, named anonymous memory, a path with a space.
      "7f0020000000-7f0020100000 rw-s 00000000 00:01 7 /dev/zero (deleted)\n"
      "Rss:  16 kB\nAnonymous:  0 kB\n"
      "7f0020100000-7f0020200000 rw-p 00000000 00:00 0 [anon:python arena]\n"
      "Rss:  32 kB\nAnonymous:  32 kB\nSwap:  3 kB\n"
      "7f0020200000-7f0020201000 r--p 00000000 fe:01 9 /tmp/a b.so\n"
      "Rss:  4 kB\n"
      "garbage line\n"
      "7f0030000000-7f0030001000 r-xp 00000000 00:00 0 [vdso]\nRss:  4 kB\n"
      "VmFlags: rd ex\n";
  v1::MemoryMap m;
  ClassifySmaps(smaps, 20, &m);
  EXPECT_EQ(m.mappings(), 12);
  EXPECT_EQ(m.arena_count(), 2);
  EXPECT_EQ(m.arena_rss_bytes(), 140 * kKiB);
  EXPECT_EQ(m.arena_size_bytes(), (64 << 20) + (1 << 20));
  EXPECT_EQ(m.stack_count(), 1);
  EXPECT_EQ(m.stack_rss_bytes(), 8 * kKiB);
  EXPECT_EQ(m.special_rss_bytes(), 20 * kKiB);
  EXPECT_EQ(m.other_anon_rss_bytes(), 36 * kKiB);
  EXPECT_EQ(m.file_rss_bytes(), 4 * kKiB);
  EXPECT_EQ(m.anon_rss_bytes(), 32 * kKiB);
  EXPECT_EQ(m.swap_bytes(), 3 * kKiB);
  EXPECT_EQ(m.anon_mappings(), 9);
  EXPECT_EQ(ClassSum(m), m.rss_bytes());
  ASSERT_EQ(m.largest_size(), 12);
  EXPECT_EQ(m.largest(0).kind(), "arena");
  bool saw_space_path = false;
  for (const auto& l : m.largest()) saw_space_path |= l.name() == "/tmp/a b.so";
  EXPECT_TRUE(saw_space_path);
}

TEST(ClassifySmapsTest, GarbageIsHarmless) {
  v1::MemoryMap m;
  ClassifySmaps("", 5, &m);
  EXPECT_EQ(m.mappings(), 0);
  ClassifySmaps("Rss: 4 kB\nzz\n\n\n-\n0-\nabc-def\nffff-0 rw-p\n", 5, &m);
  EXPECT_EQ(m.rss_bytes(), 0);
}

TEST(DetectAllocatorTest, FromCapturedMaps) {
  MappedAllocator glibc = DetectAllocator(Fixture("py_arenas.maps"));
  EXPECT_EQ(glibc.name, "glibc");
  EXPECT_EQ(glibc.library, "/usr/lib/x86_64-linux-gnu/libc.so.6");

  MappedAllocator je = DetectAllocator(Fixture("py_jemalloc.maps"));
  EXPECT_EQ(je.name, "jemalloc");
  EXPECT_EQ(je.library, "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");

  // The kernel shows the file the symlink pointed to, not the name given in
  // LD_PRELOAD (libmimalloc.so.2 -> libmimalloc.so.2.0).
  MappedAllocator mi = DetectAllocator(Fixture("py_mimalloc.maps"));
  EXPECT_EQ(mi.name, "mimalloc");
  EXPECT_EQ(mi.library, "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0");

  MappedAllocator tc = DetectAllocator(Fixture("py_tcmalloc.maps"));
  EXPECT_EQ(tc.name, "tcmalloc");
  EXPECT_EQ(tc.library,
            "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4.5.10");
}

TEST(IsMappedTest, MatchesPathsOnly) {
  const std::string maps = Fixture("py_jemalloc.maps");
  EXPECT_TRUE(IsMapped(maps, "libjemalloc.so.2"));
  EXPECT_TRUE(IsMapped(maps, "[vdso]"));
  EXPECT_FALSE(IsMapped(maps, "libmimalloc"));
  EXPECT_FALSE(IsMapped(maps, "7f"));  // addresses are not paths
  EXPECT_FALSE(IsMapped(Fixture("py_arenas.maps"), "jemalloc"));
}

TEST(EnvironTest, ParsesAndFilters) {
  std::map<std::string, std::string> env =
      ParseEnviron(Fixture("py_jemalloc.environ"));
  EXPECT_EQ(env.size(), 5u);
  EXPECT_EQ(env["HOME"], "/root");
  std::map<std::string, std::string> kept = AllocatorEnv(env);
  std::map<std::string, std::string> want = {
      {"LD_PRELOAD", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"},
      {"MALLOC_CONF", "background_thread:true,dirty_decay_ms:0"}};
  EXPECT_EQ(kept, want);

  kept = AllocatorEnv(ParseEnviron(Fixture("py_arenas.environ")));
  want = {{"PYTHONMALLOC", "malloc"}};
  EXPECT_EQ(kept, want);

  kept = AllocatorEnv(ParseEnviron(Fixture("py_mimalloc.environ")));
  EXPECT_EQ(kept.count("MIMALLOC_DECOMMIT_DELAY"), 1u);
  EXPECT_EQ(kept.count("LD_PRELOAD"), 1u);
  EXPECT_EQ(kept.count("PATH"), 0u);
}

TEST(EnvironTest, OddEntries) {
  using namespace std::string_literals;
  auto env = ParseEnviron("A=1\0A=2\0=x\0\0NOEQ\0B=c=d\0MALLOC_ARENA_MAX=2"s);
  EXPECT_EQ(env["A"], "1");  // first wins, like getenv
  EXPECT_EQ(env["B"], "c=d");
  EXPECT_EQ(env.count("NOEQ"), 1u);
  EXPECT_EQ(env.count(""), 0u);
  EXPECT_EQ(AllocatorEnv(env).size(), 1u);
  env = {{"GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0"},
         {"TCMALLOC_RELEASE_RATE", "10"},
         {"PYTHONMALLOCSTATS", "1"},
         {"MALLOCX", "no"},
         {"LD_LIBRARY_PATH", "/x"}};
  EXPECT_EQ(AllocatorEnv(env).size(), 3u);
}

// Live checks against this very process.
TEST(LiveTest, StatusAgreesWithSmaps) {
  v1::ProcStatus s;
  ASSERT_TRUE(ReadStatus(0, &s).ok());
  EXPECT_GT(s.rss_bytes(), 0);
  EXPECT_GE(s.threads(), 1);
  v1::ProcStatus by_pid;
  ASSERT_TRUE(ReadStatus(getpid(), &by_pid).ok());
  EXPECT_EQ(by_pid.threads(), s.threads());

  v1::MemoryMap m;
  ASSERT_TRUE(ReadSmaps(0, 0, &m).ok());
  EXPECT_EQ(ClassSum(m), m.rss_bytes());
  EXPECT_GT(m.file_rss_bytes(), 0);
  // RSS moves a little between the two reads; 10% is plenty.
  EXPECT_NEAR(static_cast<double>(m.rss_bytes()), s.rss_bytes(),
              0.1 * s.rss_bytes());
  EXPECT_EQ(m.largest_size(), 0);
}

TEST(LiveTest, ThreadsStacksAndCensus) {
  constexpr int kThreads = 6;
  absl::Barrier* started = new absl::Barrier(kThreads + 1);
  absl::Notification done;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      pthread_setname_np(pthread_self(), i < 4 ? "census-a" : "census-b");
      if (started->Block()) delete started;
      done.WaitForNotification();
    });
  }
  if (started->Block()) delete started;

  google::protobuf::RepeatedPtrField<v1::ThreadName> census;
  ASSERT_TRUE(ThreadCensus(0, &census).ok());
  int a = 0, b = 0, total = 0;
  for (const auto& t : census) {
    total += t.count();
    if (t.comm() == "census-a") a = t.count();
    if (t.comm() == "census-b") b = t.count();
  }
  EXPECT_EQ(a, 4);
  EXPECT_EQ(b, 2);
  for (int i = 1; i < census.size(); ++i) {
    EXPECT_GE(census[i - 1].count(), census[i].count());
  }
  v1::ProcStatus s;
  ASSERT_TRUE(ReadStatus(0, &s).ok());
  EXPECT_EQ(total, s.threads());

  // Every std::thread has a guard-page-preceded stack.
  v1::MemoryMap m;
  ASSERT_TRUE(ReadSmaps(0, 0, &m).ok());
  EXPECT_GE(m.stack_count(), kThreads + 1);

  done.Notify();
  for (auto& t : threads) t.join();
}

TEST(LiveTest, EnvironAndMaps) {
  // environ is what the process started with: setenv() now changes nothing.
  setenv("MALLOC_ARENA_MAX", "1", 1);
  auto env = ReadEnviron(0);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->count("MALLOC_ARENA_MAX"), 0u);
  EXPECT_EQ(env->count("TEST_SRCDIR"), 1u);  // set by bazel test

  auto maps = ReadProcFile(0, "maps");
  ASSERT_TRUE(maps.ok());
  EXPECT_TRUE(IsMapped(*maps, "libc.so"));
  EXPECT_EQ(DetectAllocator(*maps).name, "glibc");

  EXPECT_FALSE(ReadProcFile(0, "no-such-file").ok());
  EXPECT_EQ(MappedText::Read(0, "no-such-file").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadStatus(999999999, nullptr).code(), absl::StatusCode::kNotFound);
}

// The mmapped reader the snapshot uses returns what the heap one does.
TEST(LiveTest, MappedTextMatchesReadProcFile) {
  auto heap = ReadProcFile(0, "environ");
  auto mapped = MappedText::Read(0, "environ");
  ASSERT_TRUE(heap.ok() && mapped.ok());
  EXPECT_EQ(mapped->view(), *heap);
  EXPECT_GT(mapped->view().size(), 0u);
  MappedText moved = *std::move(mapped);
  EXPECT_EQ(moved.view(), *heap);

  auto env = ReadEnviron(0);
  auto kept = ReadAllocatorEnv(0);
  ASSERT_TRUE(env.ok() && kept.ok());
  EXPECT_EQ(*kept, AllocatorEnv(*env));
}


TEST(ParseThreadStatTest, CommWithSpacesAndParens) {
  // A real line shape (proc(5)); the comm "a) (b c" holds both delimiters.
  const std::string line =
      "4242 (a) (b c) S 1 4242 4242 0 -1 4194368 100 0 0 0 5 3 0 0 20 0 3 0 123456 1000 "
      "200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
  ThreadView t;
  ASSERT_TRUE(ParseThreadStat(line, &t));
  EXPECT_EQ(t.tid, 4242);
  EXPECT_EQ(t.comm, "a) (b c");
  EXPECT_EQ(t.state, 'S');
  EXPECT_EQ(t.ppid, 1);
  EXPECT_EQ(t.minflt, 100u);
  EXPECT_EQ(t.flags, 4194368u);
  EXPECT_EQ(t.start_ticks, 123456u);
}

TEST(ParseThreadStatTest, RejectsShortAndGarbage) {
  ThreadView t;
  EXPECT_FALSE(ParseThreadStat("", &t));
  EXPECT_FALSE(ParseThreadStat("12 (x) S 1 2 3", &t));
  EXPECT_FALSE(ParseThreadStat("x (y) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", &t));
  EXPECT_FALSE(ParseThreadStat("12 (y) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", &t));
  EXPECT_TRUE(ParseThreadStat("12 (y) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", &t));
  EXPECT_EQ(t.start_ticks, 5u);
}

TEST(ForEachThreadTest, ThisProcessStatAndWchan) {
  absl::Notification stop;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&] {
      pthread_setname_np(pthread_self(), "feach");
      stop.WaitForNotification();
    });
  }
  // Give the names time to be set: poll the census, never sleep blindly.
  int named = 0;
  for (int tries = 0; tries < 1000 && named < 3; ++tries) {
    named = 0;
    ASSERT_TRUE(ForEachThread(0, kThreadComm, [&](const ThreadView& t) {
                  named += t.comm == "feach" ? 1 : 0;
                }).ok());
    if (named < 3) std::this_thread::yield();
  }
  ThreadView main_thread;
  int seen = 0;
  ThreadScan scan;
  ASSERT_TRUE(ForEachThread(0, kThreadStat | kThreadWchan,
                            [&](const ThreadView& t) {
                              ++seen;
                              EXPECT_FALSE(t.wchan.empty());
                              if (t.tid == getpid()) main_thread = t;
                            },
                            &scan)
                  .ok());
  EXPECT_EQ(seen, scan.listed - scan.vanished);
  EXPECT_GE(seen, 4);
  EXPECT_EQ(main_thread.tid, getpid());
  EXPECT_GT(main_thread.start_ticks, 0u);
  int limited = 0;
  ASSERT_TRUE(ForEachThread(0, kThreadComm, [&](const ThreadView&) { ++limited; }, &scan, 2).ok());
  EXPECT_EQ(limited, 2);
  EXPECT_TRUE(scan.truncated);
  stop.Notify();
  for (auto& t : threads) t.join();
  EXPECT_FALSE(ForEachThread(-5, kThreadComm, [](const ThreadView&) {}).ok());
}

TEST(CountCpuListTest, RangesAndErrors) {
  EXPECT_EQ(CountCpuList("0-1"), 2);
  EXPECT_EQ(CountCpuList("0"), 1);
  EXPECT_EQ(CountCpuList("0-3,8,10-11\n"), 7);
  EXPECT_EQ(CountCpuList(""), -1);
  EXPECT_EQ(CountCpuList("3-1"), -1);
  EXPECT_EQ(CountCpuList("a"), -1);
  EXPECT_EQ(CountCpuList("0-1,"), -1);
}

TEST(StatusFieldTest, FindsKeyNotPrefix) {
  const std::string text = "Cpus_allowed:\t3\nCpus_allowed_list:\t0-1\nUid:\t0\t0\t0\t0\n";
  EXPECT_EQ(StatusField(text, "Cpus_allowed_list"), "0-1");
  EXPECT_EQ(StatusField(text, "Cpus_allowed"), "3");
  EXPECT_EQ(StatusField(text, "Uid"), "0\t0\t0\t0");
  EXPECT_EQ(StatusField(text, "Gid"), "");
}

TEST(MappedPathTest, BasenamePrefixAndPart) {
  const std::string maps =
      "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so\n"
      "7f02-7f03 r--p 00000000 08:01 2 /opt/x/_rsslab.cpython-311-x86_64-linux-gnu.so\n"
      "7f04-7f05 rw-p 00000000 00:00 0 \n";
  EXPECT_EQ(MappedPath(maps, "libopenblas"),
            "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so");
  EXPECT_EQ(MappedPath(maps, "_rsslab", ".so"), "/opt/x/_rsslab.cpython-311-x86_64-linux-gnu.so");
  EXPECT_EQ(MappedPath(maps, "openblas"), "");  // a directory name is not a basename
  EXPECT_EQ(MappedPath(maps, "_rsslab", ".pyc"), "");
}

}  // namespace
}  // namespace procfs
}  // namespace rsslab
