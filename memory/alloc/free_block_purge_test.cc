// PurgeFreeBlocksThisThread under the real mimalloc 2.0.9 and the seed's
// 3.0.1 (the test re-runs itself with each LD_PRELOADed; 3.0.1 from .deps/,
// where ./rsslab setup unpacks it): the pages inside free blocks leave RSS,
// every live block keeps its bytes, and the heap allocates correctly after.
// Under glibc it refuses and touches nothing.

#include "memory/alloc/free_block_purge.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/deps_env.h"
#include "gtest/gtest.h"
#include "memory/alloc/alloc.h"

namespace rsslab {
namespace alloc {
namespace {

constexpr const char* kMimalloc = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";

int64_t RssBytes() {
  long pages = 0, resident = 0;  // NOLINT(runtime/int): statm's type
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE);
}

// Block i: 20..60 KiB (medium pages), every byte a function of i.
size_t SizeOf(int i) { return (20 + (i * 7) % 41) << 10; }
char ByteOf(int i, size_t k) { return static_cast<char>((i * 31 + k) % 251 + 1); }

// Frees every block but each `keep_every`-th, then mi_collect(true): the
// survivors pin their pages, whose other blocks are free, and only the
// purge can return those.
void FreeAllButEvery(int keep_every, std::vector<char*>* blocks) {
  for (size_t i = 0; i < blocks->size(); ++i) {
    if (i % keep_every != 0) {
      free((*blocks)[i]);
      (*blocks)[i] = nullptr;
    }
  }
  auto collect = reinterpret_cast<void (*)(bool)>(dlsym(RTLD_DEFAULT, "mi_collect"));
  ASSERT_NE(collect, nullptr);
  collect(true);
}

// The purge on this thread, with RSS just before and after it.
struct Measured {
  FreeBlockPurge r;
  int64_t before = 0;
  int64_t after = 0;
};
Measured PurgeMeasured() {
  Measured m;
  m.before = RssBytes();
  m.r = PurgeFreeBlocksThisThread();
  m.after = RssBytes();
  return m;
}

bool Intact(const char* p, int i) {
  for (size_t k = 0; k < SizeOf(i); k += 512) {
    if (p[k] != ByteOf(i, k)) return false;
  }
  return p[SizeOf(i) - 1] == ByteOf(i, SizeOf(i) - 1);
}

TEST(FreeBlockPurgeTest, ReturnsFreeBlockPagesAndKeepsLiveBlocks) {
  if (Allocator::Get().name() != "mimalloc") {
    FreeBlockPurge r = PurgeFreeBlocksThisThread();
    EXPECT_FALSE(r.ran);
    EXPECT_EQ(r.note, "not mimalloc");
    GTEST_SKIP() << "checked under mimalloc by the re-runs (main)";
  }
  // The re-run's library is the one loaded (a preload that failed would
  // leave glibc, caught above by the refusal's absence).
  const MimallocLayout* layout = Allocator::Get().mimalloc_layout();
  ASSERT_NE(layout, nullptr);
  const char* want = getenv("RSSLAB_PURGE_TEST_CHILD");
  ASSERT_STREQ(layout->family, want == nullptr ? "" : want) << Allocator::Get().library();
  constexpr int kBlocks = 6000;  // about 230 MiB
  std::vector<char*> blocks(kBlocks);
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = static_cast<char*>(malloc(SizeOf(i)));
    ASSERT_NE(blocks[i], nullptr);
    for (size_t k = 0; k < SizeOf(i); ++k) blocks[i][k] = ByteOf(i, k);
  }
  // Every 10th survives: each medium page keeps a live block, so no page
  // is wholly free and mi_collect alone returns little.
  FreeAllButEvery(10, &blocks);
  if (HasFatalFailure()) return;
  const auto [r, before, after] = PurgeMeasured();
  ASSERT_TRUE(r.ran) << r.note;
  EXPECT_EQ(r.failed, 0);
  EXPECT_GT(r.free_blocks, kBlocks / 2);
  EXPECT_GT(r.bytes, 100ll << 20);
  EXPECT_LT(after, before - (80ll << 20)) << "RSS " << before << " -> " << after;
  for (int i = 0; i < kBlocks; i += 10) ASSERT_TRUE(Intact(blocks[i], i)) << "block " << i;
  // The free lists are intact: the freed slots are handed out again, and
  // what is written there stays.
  std::vector<char*> again(kBlocks);
  for (int i = 1; i < kBlocks; ++i) {
    if (i % 10 == 0) continue;
    again[i] = static_cast<char*>(malloc(SizeOf(i)));
    ASSERT_NE(again[i], nullptr);
    for (size_t k = 0; k < SizeOf(i); ++k) again[i][k] = ByteOf(i, k);
  }
  for (int i = 1; i < kBlocks; ++i) {
    if (i % 10 != 0) {
      ASSERT_TRUE(Intact(again[i], i)) << "new block " << i;
    }
  }
  for (int i = 0; i < kBlocks; i += 10) ASSERT_TRUE(Intact(blocks[i], i)) << "block " << i;
  for (char* p : again) free(p);
  for (char* p : blocks) free(p);
}

// Blocks of 5 to 7 KiB (small pages, the sizes around the seed's median
// body): a free block covers a whole OS page past the one with its link
// often enough that the purge returns some of what its neighbours pin.
TEST(FreeBlockPurgeTest, BlocksBetweenOneAndTwoPagesToo) {
  if (Allocator::Get().name() != "mimalloc") GTEST_SKIP() << "checked under mimalloc";
  constexpr int kBlocks = 24000;  // about 140 MiB
  auto size_of = [](int i) -> size_t { return (5 + i % 3) << 10; };
  std::vector<char*> blocks(kBlocks);
  for (int i = 0; i < kBlocks; ++i) {
    blocks[i] = static_cast<char*>(malloc(size_of(i)));
    ASSERT_NE(blocks[i], nullptr);
    std::memset(blocks[i], ByteOf(i, 0), size_of(i));
  }
  // Every 8th survives (the three sizes in turn): each page keeps some.
  FreeAllButEvery(8, &blocks);
  if (HasFatalFailure()) return;
  const auto [r, before, after] = PurgeMeasured();
  ASSERT_TRUE(r.ran) << r.note;
  EXPECT_EQ(r.failed, 0);
  // Of about 122 MiB in free blocks, a quarter to three quarters of a page
  // per block past its first: well over 20 MiB.
  EXPECT_GT(r.bytes, 20ll << 20);
  EXPECT_LT(after, before - (20ll << 20)) << "RSS " << before << " -> " << after;
  for (int i = 0; i < kBlocks; i += 8) {
    for (size_t k = 0; k < size_of(i); k += 256) {
      ASSERT_EQ(blocks[i][k], ByteOf(i, 0)) << "block " << i << " byte " << k;
    }
  }
  // Reused slots work and keep what is written.
  std::vector<char*> again;
  for (int i = 0; i < kBlocks; ++i) {
    if (i % 8 == 0) continue;
    char* p = static_cast<char*>(malloc(size_of(i)));
    ASSERT_NE(p, nullptr);
    std::memset(p, ByteOf(i, 1), size_of(i));
    again.push_back(p);
  }
  for (char* p : again) free(p);
  for (char* p : blocks) free(p);
}

}  // namespace
}  // namespace alloc
}  // namespace rsslab

namespace {

// Runs this binary again with `library` preloaded; its exit status.
int RunUnder(const char* library, const char* family, char** argv) {
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fork");
    return 1;
  }
  if (pid == 0) {
    setenv("RSSLAB_PURGE_TEST_CHILD", family, 1);
    setenv("LD_PRELOAD", library, 1);
    execv("/proc/self/exe", argv);
    std::perror("execv");
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  // Once under glibc (the refusal), then again under each mimalloc.
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc != 0 || getenv("RSSLAB_PURGE_TEST_CHILD") != nullptr) return rc;
  if (access(rsslab::alloc::kMimalloc, R_OK) != 0) {
    std::fprintf(stderr, "%s missing (./rsslab setup installs libmimalloc2.0)\n",
                 rsslab::alloc::kMimalloc);
    return 1;
  }
  if (int r = RunUnder(rsslab::alloc::kMimalloc, "2.0.x", argv); r != 0) return r;
  // Optional, as everywhere: setup fetches it when the mirror has it. Its
  // path is pinned in tools/setup/mimalloc3.env; both are in the runfiles
  // through //:mimalloc3 (the test's working directory).
  absl::StatusOr<rsslab::Mimalloc3Dep> m3 =
      rsslab::ReadMimalloc3Dep(std::string(rsslab::kMimalloc3EnvFile));
  if (!m3.ok()) {
    std::fprintf(stderr, "%s\n", std::string(m3.status().message()).c_str());
    return 1;
  }
  if (access(m3->lib.c_str(), R_OK) != 0) {
    std::printf("skip: %s not fetched (./rsslab setup)\n", m3->lib.c_str());
    return 0;
  }
  return RunUnder(m3->lib.c_str(), "3.x", argv);
}
