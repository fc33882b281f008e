// Against real forked processes: this test is the master, its children the
// workers (forks of the same executable, as a pre-fork server's are).
#include "common/procfs/service_memory.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace procfs {
namespace {

constexpr int64_t kMiB = 1 << 20;
char* volatile held = nullptr;  // so the compiler keeps the child's memory

// A child that touches `mib` MiB of its own and waits to be killed.
int ForkHolding(int mib) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    held = static_cast<char*>(malloc(mib * kMiB));
    memset(held, 1, mib * kMiB);
    (void)!write(ready[1], "x", 1);
    for (;;) pause();
  }
  char c;
  (void)!read(ready[0], &c, 1);
  close(ready[0]);
  close(ready[1]);
  return pid;
}

void Reap(int pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ServiceMemoryTest, ParsePss) {
  EXPECT_EQ(ParsePss("55d0-7ffe ---p 00000000 00:00 0 [rollup]\nRss:  2048 kB\n"
                     "Pss:  1536 kB\nPss_Anon: 1000 kB\n"),
            1536 * 1024);
  EXPECT_EQ(ParsePss("Rss: 2048 kB\n"), -1);
  EXPECT_EQ(ParsePss("Pss: lots kB\n"), -1);
}

TEST(ServiceMemoryTest, MasterAndWorkersSummedEachItsOwn) {
  const int small = ForkHolding(8);
  const int big = ForkHolding(40);
  ASSERT_GT(small, 0);
  ASSERT_GT(big, 0);
  EXPECT_EQ(FindMaster({big, small}), getpid());
  absl::StatusOr<rsslab::v1::ServiceMemory> m = ReadServiceMemory(getpid(), {big, small});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->processes_size(), 3);
  EXPECT_EQ(m->processes(0).role(), "master");
  EXPECT_EQ(m->processes(0).pid(), getpid());
  EXPECT_EQ(m->processes(1).pid(), std::min(small, big));  // workers by pid
  int64_t rss = 0, pss = 0;
  for (const auto& p : m->processes()) {
    EXPECT_GT(p.rss_bytes(), 0);
    EXPECT_GT(p.pss_bytes(), 0);
    EXPECT_LE(p.pss_bytes(), p.rss_bytes());
    rss += p.rss_bytes();
    pss += p.pss_bytes();
  }
  EXPECT_EQ(m->rss_bytes(), rss);
  EXPECT_EQ(m->pss_bytes(), pss);
  EXPECT_LT(m->pss_bytes(), m->rss_bytes());  // the pages shared since the fork
  auto rss_of = [&](int pid) {
    for (const auto& p : m->processes()) {
      if (p.pid() == pid) return p.rss_bytes();
    }
    return int64_t{-1};
  };
  EXPECT_GE(rss_of(big) - rss_of(small), 28 * kMiB);

  const rsslab::v1::Snapshot s = ServiceSnapshot(*m, {});
  EXPECT_EQ(s.status().rss_bytes(), rss);
  EXPECT_EQ(s.service().processes_size(), 3);

  Reap(big);
  absl::StatusOr<rsslab::v1::ServiceMemory> gone = ReadServiceMemory(getpid(), {big, small});
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find(absl::StrCat("worker pid ", big, " is gone")),
            std::string::npos)
      << gone.status();
  Reap(small);
}

TEST(ServiceMemoryTest, NoMasterWithoutACommonParentOfTheSameProgram) {
  const int child = ForkHolding(1);
  ASSERT_GT(child, 0);
  EXPECT_EQ(FindMaster({child, getpid()}), 0);  // different parents
  EXPECT_EQ(FindMaster({}), 0);
  Reap(child);
}

TEST(ServiceMemoryTest, AWorkerNotUnderTheProfileIsNamed) {
  // A "worker" started with another allocator setting than the master's
  // verified one (exec'd with its own environment, as a program that
  // spawns workers with a cleaned environment would).
  const pid_t pid = fork();
  if (pid == 0) {
    char* const argv[] = {const_cast<char*>("/bin/sleep"), const_cast<char*>("30"), nullptr};
    char* const envp[] = {const_cast<char*>("MALLOC_ARENA_MAX=8"), nullptr};
    execve("/bin/sleep", argv, envp);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  absl::Status s;
  for (int i = 0; i < 200; ++i) {  // until the exec took place
    s = SameAllocatorSetup(pid, "", {{"MALLOC_ARENA_MAX", "2"}});
    if (!s.ok() && s.message().find("=8") != std::string::npos) break;
    usleep(10000);
  }
  EXPECT_EQ(s.message(), absl::StrCat("worker pid ", pid,
                                      " started with MALLOC_ARENA_MAX=8, not the profile's 2"));
  EXPECT_TRUE(SameAllocatorSetup(pid, "", {{"MALLOC_ARENA_MAX", "8"}}).ok());
  absl::Status lib = SameAllocatorSetup(pid, "libjemalloc.so.2", {});
  EXPECT_EQ(lib.message(), absl::StrCat("worker pid ", pid,
                                        " does not have the profile's allocator "
                                        "libjemalloc.so.2 mapped"));
  Reap(pid);
}

}  // namespace
}  // namespace procfs
}  // namespace rsslab
