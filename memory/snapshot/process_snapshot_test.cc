// The process part of a snapshot, taken of this test process (real /proc,
// real allocator), and a trim's history from a Trimmer with no threads.

#include "memory/snapshot/process_snapshot.h"

#include <gnu/libc-version.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(ProcessSnapshotTest, FillsProcfsAndAllocatorOfThisProcess) {
  rsslab::v1::Snapshot s;
  FillProcessSnapshot({}, &s);
  EXPECT_EQ(s.pid(), getpid());
  EXPECT_GT(s.unix_nanos(), 0);
  EXPECT_GT(s.status().rss_bytes(), 0);
  EXPECT_GE(s.status().threads(), 1);
  EXPECT_GT(s.thread_names_size(), 0);
  EXPECT_GT(s.memory_map().rss_bytes(), 0);
  EXPECT_EQ(s.allocator(), "glibc");  // no LD_PRELOAD under bazel test
  EXPECT_FALSE(s.allocator_library().empty());
  EXPECT_TRUE(s.allocator_stats().has_glibc());
  EXPECT_EQ(s.memory_map().largest_size(), 0);
  // The fingerprint compare checks: versions as the libraries report them.
  EXPECT_EQ(s.fingerprint().glibc_version(), gnu_get_libc_version());
  EXPECT_EQ(s.fingerprint().allocator(), "glibc");
  EXPECT_EQ(s.fingerprint().allocator_version(), gnu_get_libc_version());
  EXPECT_GT(s.fingerprint().cpus_allowed(), 0);
  EXPECT_FALSE(s.fingerprint().thp_enabled().empty());

  rsslab::v1::Snapshot d;
  FillProcessSnapshot({.detail = true}, &d);
  EXPECT_GT(d.memory_map().largest_size(), 0);
}

TEST(ProcessSnapshotTest, TrimHistoryCountsEveryTrim) {
  Trimmer trimmer(nullptr);
  rsslab::v1::Snapshot before;
  FillTrimHistory(trimmer, &before);
  EXPECT_FALSE(before.has_last_trim());
  EXPECT_EQ(before.trims_total(), 0u);
  trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "manual");
  trimmer.Run(rsslab::v1::TRIM_MODE_DEFAULT, "auto_after_burst");
  rsslab::v1::Snapshot after;
  FillTrimHistory(trimmer, &after);
  EXPECT_EQ(after.trims_total(), 2u);
  EXPECT_EQ(after.auto_trims_total(), 1u);
  EXPECT_EQ(after.recent_trims_size(), 2);
  EXPECT_EQ(after.last_trim().trigger(), "auto_after_burst");
  EXPECT_EQ(after.last_trim().call(), "malloc_trim(0)");
}

}  // namespace
}  // namespace rsslab
