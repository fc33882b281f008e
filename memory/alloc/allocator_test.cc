// Runs alloc_probe under each allocator (no preload, LD_PRELOAD of jemalloc,
// mimalloc, tcmalloc) and checks what the probe saw: the detected name, non-
// empty allocator stats, and that the release calls lowered RSS and the
// allocator's own resident figure after a big, fragmented free. Also proves
// which mimalloc 2.0.9 option gives immediate release, by reading options
// back from the running allocator.
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/text_format.h"
#include "gmock/gmock.h"
#include "common/deps_env.h"
#include "gtest/gtest.h"
#include "memory/alloc/alloc.h"
#include "proto/snapshot.pb.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace rsslab {
namespace alloc {
namespace {

using bazel::tools::cpp::runfiles::Runfiles;

constexpr char kLibDir[] = "/usr/lib/x86_64-linux-gnu/";
constexpr int64_t kMiB = 1 << 20;
// The probe frees 62 MiB of 64 (fragmented); a release must return at least
// this much of it.
constexpr int64_t kMinReleased = 32 * kMiB;

struct ProbeRun {
  std::map<std::string, std::string> kv;
  int exit_code = -1;

  int64_t Int(const std::string& key) const {
    int64_t v = 0;
    auto it = kv.find(key);
    EXPECT_TRUE(it != kv.end() && absl::SimpleAtoi(it->second, &v)) << key;
    return v;
  }
  v1::AllocatorStats Stats(const std::string& step) const {
    v1::AllocatorStats s;
    auto it = kv.find("stats_" + step);
    EXPECT_TRUE(it != kv.end()) << step;
    if (it != kv.end()) {
      EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(it->second, &s))
          << it->second;
    }
    return s;
  }
  std::string Get(const std::string& key) const {
    auto it = kv.find(key);
    return it == kv.end() ? "" : it->second;
  }
};

std::string ProbePath() {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  EXPECT_NE(runfiles, nullptr) << error;
  return runfiles ? runfiles->Rlocation("rsslab/memory/alloc/alloc_probe") : "";
}

// fork/exec the probe with exactly `env`, collecting its key=value stdout.
ProbeRun RunProbe(const std::vector<std::string>& env, int idle_ms = 0) {
  ProbeRun run;
  const std::string probe = ProbePath();
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe";
    return run;
  }
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  std::string idle = std::to_string(idle_ms);
  char* argv[] = {const_cast<char*>(probe.c_str()), idle.data(), nullptr};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execve(probe.c_str(), argv, envp.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    run.kv[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  std::cout << "---- probe " << (env.size() > 1 ? env[1] : "(glibc)") << "\n"
            << out;
  return run;
}

std::vector<std::string> Env(const std::string& lib,
                             std::vector<std::string> extra = {}) {
  std::vector<std::string> env = {"PATH=/usr/bin:/bin"};
  if (!lib.empty()) {
    const std::string path = kLibDir + lib;
    EXPECT_EQ(access(path.c_str(), R_OK), 0)
        << path << " missing: run ./rsslab setup";
    env.push_back("LD_PRELOAD=" + path);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// RSS and (where the allocator has one) its resident figure fell by at least
// min_rss / kMinReleased from after the free to after both releases.
void ExpectReleased(const ProbeRun& run, bool has_resident,
                    int64_t min_rss = kMinReleased) {
  EXPECT_GE(run.Int("rss_allocated") - run.Int("rss_after_free"), -4 * kMiB)
      << "the free alone should not grow RSS";
  EXPECT_GE(run.Int("rss_after_free") - run.Int("rss_after_threads"), min_rss);
  if (has_resident) {
    EXPECT_GT(run.Int("resident_after_free"), 0);
    EXPECT_GE(run.Int("resident_after_free") - run.Int("resident_after_threads"),
              kMinReleased);
  } else {
    EXPECT_EQ(run.Int("resident_after_free"), -1);
  }
}

TEST(AllocatorProbeTest, Glibc) {
  ProbeRun run = RunProbe(Env(""));
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.Get("name"), "glibc");
  EXPECT_EQ(run.Get("library"), std::string(kLibDir) + "libc.so.6");
  v1::AllocatorStats s = run.Stats("after_free");
  EXPECT_GT(s.glibc().arena(), 0);
  EXPECT_EQ(s.glibc().version(), gnu_get_libc_version());  // the table's allocator column
  EXPECT_GT(s.glibc().uordblks(), 2 * kMiB);  // the 2 MiB kept
  EXPECT_GT(s.glibc().fordblks(), 32 * kMiB);  // the fragmented free space
  EXPECT_GE(s.glibc().malloc_info_arenas(), 2);  // main + the worker's
  EXPECT_GT(s.glibc().total_free_bytes(), 32 * kMiB);
  EXPECT_EQ(s.allocated_bytes(), s.glibc().uordblks() + s.glibc().hblkhd());
  EXPECT_EQ(run.Get("global_call"), "malloc_trim(0)");
  EXPECT_EQ(run.Int("global_ret"), 1);
  EXPECT_EQ(run.Get("thread_call"), "none");
  EXPECT_EQ(run.Get("after_threads_call"), "none");
  // malloc_trim(0) walks every arena: the global call alone released it.
  EXPECT_GE(run.Int("rss_after_free") - run.Int("rss_after_global"), kMinReleased);
  ExpectReleased(run, /*has_resident=*/false);
}

TEST(AllocatorProbeTest, Jemalloc) {
  ProbeRun run = RunProbe(Env("libjemalloc.so.2"));
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.Get("name"), "jemalloc");
  EXPECT_EQ(run.Get("library"), std::string(kLibDir) + "libjemalloc.so.2");
  v1::AllocatorStats s = run.Stats("after_free");
  EXPECT_FALSE(s.jemalloc().version().empty());
  EXPECT_GT(s.jemalloc().allocated(), 2 * kMiB);
  EXPECT_GT(s.jemalloc().resident(), 32 * kMiB);  // dirty pages, not yet decayed
  EXPECT_GT(s.jemalloc().mapped(), 0);
  EXPECT_GT(s.jemalloc().metadata(), 0);
  EXPECT_GT(s.jemalloc().narenas(), 0);
  EXPECT_EQ(s.jemalloc().dirty_decay_ms(), 10000);  // jemalloc 5.3 default
  EXPECT_EQ(s.resident_bytes(), s.jemalloc().resident());
  EXPECT_EQ(run.Get("global_call"), "mallctl(arena.4096.purge)");
  EXPECT_EQ(run.Int("global_ret"), 0);
  // Each worker only flushes its tcache; the arenas are purged once after.
  EXPECT_EQ(run.Get("thread_call"), "mallctl(thread.tcache.flush)");
  EXPECT_EQ(run.Int("thread_ret"), 0);
  EXPECT_EQ(run.Get("after_threads_call"), "mallctl(arena.4096.purge)");
  EXPECT_EQ(run.Int("after_threads_ret"), 0);
  ExpectReleased(run, /*has_resident=*/true);
}

TEST(AllocatorProbeTest, JemallocConfReachesAllocator) {
  ProbeRun run = RunProbe(Env("libjemalloc.so.2",
                         {"MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0"}));
  ASSERT_EQ(run.exit_code, 0);
  v1::AllocatorStats s = run.Stats("end");
  EXPECT_EQ(s.jemalloc().dirty_decay_ms(), 0);
  EXPECT_EQ(s.jemalloc().muzzy_decay_ms(), 0);
}

// mimalloc 2.0.9 with default options. Measured here: with no idle time
// neither call releases anything (decommit_delay 25 ms); after more than
// segment_decommit_delay (500 ms) of idle, mi_collect(true) from the main
// thread still changes nothing for the worker's heap, while the worker's own
// mi_collect(true) drops commit 104 -> 43 MB and RSS 81 -> 52 MB.
TEST(AllocatorProbeTest, Mimalloc) {
  ProbeRun run = RunProbe(Env("libmimalloc.so.2"), /*idle_ms=*/600);
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.Get("name"), "mimalloc");
  // The kernel names the file the symlink points to.
  EXPECT_EQ(run.Get("library"), std::string(kLibDir) + "libmimalloc.so.2.0");
  v1::AllocatorStats s = run.Stats("after_free");
  EXPECT_EQ(s.mimalloc().version(), 209);
  EXPECT_GT(s.mimalloc().current_commit(), 32 * kMiB);
  EXPECT_GT(s.mimalloc().peak_rss(), 0);
  EXPECT_EQ(s.mimalloc().options().at("decommit_delay"), 25);  // 2.0.9 default
  EXPECT_GE(s.mimalloc().options_size(), 20);
  EXPECT_EQ(s.resident_bytes(), s.mimalloc().current_commit());
  EXPECT_EQ(run.Get("global_call"), "mi_collect(true)");
  EXPECT_EQ(run.Get("thread_call"), "mi_collect(true)");
  EXPECT_EQ(run.Get("after_threads_call"), "none");
  // Global (another thread's) collect: the worker's heap keeps its memory.
  EXPECT_LT(run.Int("resident_after_free") - run.Int("resident_after_global"),
            kMiB);
  // The worker's own collect releases (part of) it.
  ExpectReleased(run, /*has_resident=*/true, /*min_rss=*/16 * kMiB);
}

// mimalloc 2.0.9's immediate-release option is decommit_delay, set by
// MIMALLOC_DECOMMIT_DELAY (or its deprecated alias MIMALLOC_RESET_DELAY);
// MIMALLOC_PURGE_DELAY (the 2.1+ name) is silently ignored. Read back from
// the running allocator, and shown to act: with it, the free itself returns
// the memory (RSS 81 -> 23 MB here) and the worker's collect lowers commit.
TEST(AllocatorProbeTest, MimallocImmediateReleaseOption) {
  auto decommit_delay = [](std::vector<std::string> extra) {
    ProbeRun run = RunProbe(Env("libmimalloc.so.2", extra));
    EXPECT_EQ(run.exit_code, 0);
    return run.Stats("end").mimalloc().options().at("decommit_delay");
  };
  EXPECT_EQ(decommit_delay({}), 25);
  EXPECT_EQ(decommit_delay({"MIMALLOC_RESET_DELAY=0"}), 0);
  EXPECT_EQ(decommit_delay({"MIMALLOC_PURGE_DELAY=0"}), 25);  // ignored

  ProbeRun run = RunProbe(Env("libmimalloc.so.2", {"MIMALLOC_DECOMMIT_DELAY=0"}));
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.Stats("end").mimalloc().options().at("decommit_delay"), 0);
  EXPECT_GE(run.Int("rss_allocated") - run.Int("rss_after_free"), kMinReleased);
  EXPECT_GE(run.Int("resident_after_free") - run.Int("resident_after_thread"),
            16 * kMiB);

  // Already immediate: a trim leaves the option alone.
  EXPECT_EQ(run.Get("delay_option"), "mimalloc decommit_delay");
  EXPECT_EQ(run.Int("delay_applied"), 0);
  EXPECT_EQ(run.Int("delay_during"), 0);

  ProbeRun slow = RunProbe(Env("libmimalloc.so.2"));  // default, no idle
  EXPECT_LT(slow.Int("rss_allocated") - slow.Int("rss_after_free"), 4 * kMiB);
  // A trim holds the default 25 ms at 0 (set and read back through the
  // running allocator) and puts it back.
  EXPECT_EQ(slow.Get("delay_option"), "mimalloc decommit_delay");
  EXPECT_EQ(slow.Int("delay_applied"), 1);
  EXPECT_EQ(slow.Int("delay_before"), 25);
  EXPECT_EQ(slow.Int("delay_during"), 0);
  EXPECT_EQ(slow.Int("delay_after"), 25);
  EXPECT_EQ(slow.Stats("end").mimalloc().options().at("decommit_delay"), 25);
}

// jemalloc, tcmalloc and glibc have no release timer a trim needs to hold:
// their trim calls ignore decay, release rate (docs/TRIM.md).
TEST(AllocatorProbeTest, NoReleaseDelayOverrideOutsideMimalloc) {
  for (const char* lib : {"", "libjemalloc.so.2", "libtcmalloc.so.4"}) {
    ProbeRun run = RunProbe(Env(lib));
    ASSERT_EQ(run.exit_code, 0) << lib;
    EXPECT_EQ(run.Get("delay_option"), "") << lib;
    EXPECT_EQ(run.Int("delay_applied"), 0) << lib;
  }
}

// The version tables (alloc.h), checked against what each tag's mimalloc.h
// says (docs/TRIM.md): reading 3.0.1 with 2.0.9's table once took its
// arena_reserve (index 23) for segment_decommit_delay.
TEST(MimallocLayoutTest, FamiliesAndIndices) {
  for (int v : {209, 210, 211}) EXPECT_STREQ(MimallocLayoutFor(v)->family, "2.0.x") << v;
  for (int v : {212, 217, 219}) EXPECT_STREQ(MimallocLayoutFor(v)->family, "2.1.x") << v;
  for (int v : {300, 301}) EXPECT_STREQ(MimallocLayoutFor(v)->family, "3.x") << v;
  // Other enums (2.0.7, 2.2.4, 3.0.3, 3.0.10, 2.3.0): not read, so refused.
  for (int v : {207, 224, 303, 3010, 20300}) EXPECT_EQ(MimallocLayoutFor(v), nullptr) << v;
  EXPECT_TRUE(MimallocOptionIds(224).empty());

  std::map<std::string, int> v209 = MimallocOptionIds(209);
  EXPECT_EQ(v209.size(), 22u);
  EXPECT_EQ(v209.at("decommit_delay"), mi_option_decommit_delay);  // the installed header
  EXPECT_EQ(v209.at("segment_decommit_delay"), 23);
  EXPECT_EQ(v209.count("purge_delay"), 0u);
  std::map<std::string, int> v301 = MimallocOptionIds(301);
  EXPECT_EQ(v301.at("purge_delay"), 15);
  EXPECT_EQ(v301.at("arena_reserve"), 23);
  EXPECT_EQ(v301.at("page_commit_on_demand"), 40);
  EXPECT_EQ(v301.count("segment_decommit_delay"), 0u);
  EXPECT_EQ(v301.count("decommit_delay"), 0u);
  // 2.1.7 and 2.1.7a both say 217 and differ past index 28.
  for (const auto& [name, index] : MimallocOptionIds(217)) EXPECT_LE(index, 28) << name;
  EXPECT_EQ(MimallocOptionIds(212).at("limit_os_alloc"), 17);
  EXPECT_EQ(MimallocOptionIds(214).at("disallow_os_alloc"), 17);
  // No version maps two names to one index.
  for (int v : {209, 212, 214, 217, 218, 301}) {
    std::set<int> seen;
    for (const auto& [name, index] : MimallocOptionIds(v)) {
      EXPECT_TRUE(seen.insert(index).second) << v << " " << name;
    }
  }
  EXPECT_EQ(MimallocVersionText(209), "2.0.9");
  EXPECT_EQ(MimallocVersionText(301), "3.0.1");
  EXPECT_EQ(MimallocVersionText(3010), "mi_version 3010");
}

// Debian 13's mimalloc 3.0.1 from .deps/ (./rsslab setup), when there:
// read with 3.x's layout, its committed counter refused, and a trim holds
// purge_delay (2500 ms) at 0 and puts it back.
TEST(AllocatorProbeTest, Mimalloc3) {
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::CreateForTest(&error));
  ASSERT_NE(runfiles, nullptr) << error;
  // The path pinned in tools/setup/mimalloc3.env; both in the runfiles
  // through //:mimalloc3.
  absl::StatusOr<Mimalloc3Dep> m3 =
      ReadMimalloc3Dep(runfiles->Rlocation(absl::StrCat("rsslab/", kMimalloc3EnvFile)));
  ASSERT_TRUE(m3.ok()) << m3.status();
  const std::string lib = runfiles->Rlocation(absl::StrCat("rsslab/", m3->lib));
  if (access(lib.c_str(), R_OK) != 0) GTEST_SKIP() << "mimalloc 3.0.1 not fetched (./rsslab setup)";
  ProbeRun run = RunProbe({"PATH=/usr/bin:/bin", "LD_PRELOAD=" + lib});
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.Get("name"), "mimalloc");
  v1::AllocatorStats s = run.Stats("end");
  EXPECT_EQ(s.mimalloc().version(), 301);
  EXPECT_EQ(s.mimalloc().layout(), "3.x");
  EXPECT_EQ(s.mimalloc().options().at("purge_delay"), 2500);
  ASSERT_EQ(s.mimalloc().refused_size(), 1);
  EXPECT_EQ(s.resident_bytes(), 0);
  EXPECT_GT(s.mimalloc().peak_rss(), 32 * kMiB);
  EXPECT_EQ(run.Get("delay_option"), "mimalloc purge_delay");
  EXPECT_EQ(run.Int("delay_applied"), 1);
  EXPECT_EQ(run.Int("delay_before"), 2500);
  EXPECT_EQ(run.Int("delay_during"), 0);
  EXPECT_EQ(run.Int("delay_after"), 2500);
  // Not asserted: in this probe (62 of 64 MiB freed in 1 MiB blocks, then
  // the worker's mi_collect(true) at purge_delay 2500) 3.0.1 returned only
  // ~2 MiB of RSS, unlike the server's trims (docs/TRIM.md); not explained yet.
}

TEST(AllocatorProbeTest, Tcmalloc) {
  ProbeRun run = RunProbe(Env("libtcmalloc.so.4"));
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.Get("name"), "tcmalloc");
  EXPECT_EQ(run.Get("library").rfind(std::string(kLibDir) + "libtcmalloc.so.4", 0),
            0u);
  v1::AllocatorStats s = run.Stats("after_free");
  EXPECT_GT(s.tcmalloc().current_allocated_bytes(), 2 * kMiB);
  EXPECT_GT(s.tcmalloc().heap_size(), 32 * kMiB);
  EXPECT_GT(s.tcmalloc().release_rate(), 0.0);  // gperftools default 1.0
  // tc_version(): the sweep table's allocator column names it.
  EXPECT_THAT(s.tcmalloc().version(), ::testing::StartsWith("gperftools 2."));
  EXPECT_EQ(s.resident_bytes(), s.tcmalloc().heap_size() -
                                    s.tcmalloc().pageheap_unmapped_bytes());
  EXPECT_EQ(run.Get("global_call"), "MallocExtension_ReleaseFreeMemory()");
  EXPECT_EQ(run.Get("thread_call"), "MallocExtension_MarkThreadIdle()");
  EXPECT_EQ(run.Get("after_threads_call"), "MallocExtension_ReleaseFreeMemory()");
  ExpectReleased(run, /*has_resident=*/true);
}

TEST(AllocatorProbeTest, TcmallocReleaseRateReachesAllocator) {
  ProbeRun run = RunProbe(Env("libtcmalloc.so.4", {"TCMALLOC_RELEASE_RATE=10"}));
  ASSERT_EQ(run.exit_code, 0);
  EXPECT_DOUBLE_EQ(run.Stats("end").tcmalloc().release_rate(), 10.0);
}

}  // namespace
}  // namespace alloc
}  // namespace rsslab
