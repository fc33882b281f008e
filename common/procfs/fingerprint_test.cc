#include "common/procfs/fingerprint.h"

#include <gnu/libc-version.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/procfs/procfs.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace procfs {
namespace {

TEST(FingerprintTest, SelectedModeIsTheBracketedOne) {
  EXPECT_EQ(SelectedMode("always [madvise] never"), "madvise");
  EXPECT_EQ(SelectedMode("[always] madvise never"), "always");
  EXPECT_EQ(SelectedMode("always madvise never"), "");
}

TEST(FingerprintTest, GlibcBannerVersion) {
  std::string bytes("\x7f" "ELF junk GNU C Library is not this\0"
                    "GNU C Library (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36.\n"
                    "Copyright", 200);
  EXPECT_EQ(GlibcBannerVersion(bytes), "2.36");
  EXPECT_EQ(GlibcBannerVersion("no banner here"), "");
}

// A cgroup tree under a temporary directory.
class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fingerprint_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { system(("rm -rf " + root_).c_str()); }
  void Write(const std::string& rel, const std::string& text) {
    const std::string path = root_ + "/" + rel;
    system(("mkdir -p $(dirname " + path + ")").c_str());
    std::ofstream(path) << text << "\n";
  }
  std::string root_;
};

TEST_F(CgroupTree, V1TakesTheTightestQuotaOnThePathToTheRoot) {
  Write("cpu,cpuacct/cpu.cfs_quota_us", "-1");
  Write("cpu,cpuacct/cpu.cfs_period_us", "100000");
  Write("cpu,cpuacct/ci/cpu.cfs_quota_us", "150000");
  Write("cpu,cpuacct/ci/cpu.cfs_period_us", "100000");
  Write("cpu,cpuacct/ci/job/cpu.cfs_quota_us", "-1");
  Write("cpu,cpuacct/ci/job/cpu.cfs_period_us", "100000");
  const std::string cg = "4:memory:/x\n3:cpu,cpuacct:/ci/job\n0::/\n";
  EXPECT_EQ(CgroupCpuMax(cg, root_), "150000 100000");
  EXPECT_EQ(CgroupCpuMax("3:cpu,cpuacct:/\n", root_), "max");
}

TEST_F(CgroupTree, V2ReadsCpuMaxAndNoFileMeansNoLimit) {
  Write("cgroup.controllers", "cpu memory");
  Write("svc/cpu.max", "max 100000");
  Write("svc/a/cpu.max", "50000 100000");
  EXPECT_EQ(CgroupCpuMax("0::/svc/a\n", root_), "50000 100000");
  EXPECT_EQ(CgroupCpuMax("0::/svc\n", root_), "max");
  EXPECT_EQ(CgroupCpuMax("0::/\n", root_), "max");
}

TEST_F(CgroupTree, NothingMountedIsEmpty) {
  EXPECT_EQ(CgroupCpuMax("0::/svc\n", root_), "");
  EXPECT_EQ(CgroupCpuMax("", root_), "");
}

// This process, read as the server reads itself and as the loadgen reads
// another process: the same facts the kernel and libc report directly.
TEST(FingerprintTest, ReadsThisProcess) {
  setenv("MALLOC_ARENA_MAX", "3", 1);  // after start: not in the fingerprint
  rsslab::v1::Fingerprint fp;
  ReadFingerprint(0, &fp);
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(fp.cpus_allowed(), CPU_COUNT(&set));
  EXPECT_EQ(fp.cpus_online(), sysconf(_SC_NPROCESSORS_ONLN));
  EXPECT_FALSE(fp.cgroup_cpu_max().empty());
  EXPECT_TRUE(fp.thp_enabled() == "always" || fp.thp_enabled() == "madvise" ||
              fp.thp_enabled() == "never")
      << fp.thp_enabled();
  EXPECT_EQ(fp.start_env().count("MALLOC_ARENA_MAX"), 0u);

  absl::StatusOr<std::string> maps = ReadProcFile(0, "maps");
  ASSERT_TRUE(maps.ok());
  rsslab::v1::Fingerprint outside;
  ReadOutsideFingerprint(getpid(), *maps, &outside);
  EXPECT_EQ(outside.glibc_version(), gnu_get_libc_version());
  EXPECT_EQ(outside.allocator(), "glibc");
  EXPECT_EQ(outside.allocator_version(), gnu_get_libc_version());
  EXPECT_EQ(outside.cpus_allowed(), fp.cpus_allowed());
}

}  // namespace
}  // namespace procfs
}  // namespace rsslab
