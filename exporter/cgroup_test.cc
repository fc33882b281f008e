// exporter/cgroup: v2 from fixtures of real files (testdata/cgroup_v2, a
// Kubernetes pod's container cgroup and the root), v1 from this machine's
// own memory controller.
#include "exporter/cgroup.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/procfs/procfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace rsslab {
namespace exporter {
namespace {

using ::bazel::tools::cpp::runfiles::Runfiles;
using ::testing::HasSubstr;

std::string V2Root() {
  std::unique_ptr<Runfiles> r(Runfiles::CreateForTest());
  return r->Rlocation("rsslab/exporter/testdata/cgroup_v2");
}

TEST(CgroupTest, V2ContainerWorkingSetAndHeadroom) {
  absl::StatusOr<CgroupMemory> m = ReadCgroupMemory(
      V2Root(), "0::/kubepods.slice/kubepods-burstable.slice/cri-containerd-4f2a.scope\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 2);
  EXPECT_EQ(m->usage_bytes, 209715200);
  EXPECT_EQ(m->limit_bytes, 536870912);
  EXPECT_EQ(m->anon_bytes, 150994944);
  EXPECT_EQ(m->file_bytes, 52428800);
  EXPECT_EQ(m->inactive_file_bytes, 31457280);
  EXPECT_EQ(m->working_set_bytes, 209715200 - 31457280);
  EXPECT_EQ(m->headroom_bytes, 536870912 - (209715200 - 31457280));
  metrics::Exposition e;
  AppendCgroupMetrics(*m, &e);
  EXPECT_THAT(e.Text(), HasSubstr(
      "rsslab_cgroup_memory_headroom_bytes{cgroup_version=\"2\"} 358612992\n"));
}

TEST(CgroupTest, V2HostPathNotInTheContainerReadsItsRootWithoutALimit) {
  // Inside a container /proc/self/cgroup shows the host's path; the
  // container's mount is its own cgroup. The root has no memory.max.
  absl::StatusOr<CgroupMemory> m = ReadCgroupMemory(V2Root(), "0::/system.slice/elsewhere\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dir, V2Root());
  EXPECT_EQ(m->usage_bytes, 1073741824);
  EXPECT_EQ(m->limit_bytes, -1);
  EXPECT_EQ(m->headroom_bytes, -1);
  EXPECT_EQ(m->working_set_bytes, 1073741824 - 100000000);
  metrics::Exposition e;
  AppendCgroupMetrics(*m, &e);
  EXPECT_THAT(e.Text(), ::testing::Not(HasSubstr("limit")));
}

TEST(CgroupTest, BadInputIsNamed) {
  absl::StatusOr<CgroupMemory> m = ReadCgroupMemory(V2Root(), "garbage\n");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("no memory cgroup"));
  m = ReadCgroupMemory(V2Root(), "0::/../../etc\n");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("'..'"));
  m = ReadCgroupMemory("/nonexistent", "0::/\n");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("/nonexistent/memory.current"));
}

int64_t FileNumber(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  int64_t n = -1;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(ss.str()), &n) ? n : -1;
}

TEST(CgroupTest, V1OnThisMachine) {
  absl::StatusOr<std::string> self = procfs::ReadProcFile(0, "cgroup");
  ASSERT_TRUE(self.ok());
  if (!absl::StrContains(*self, ":memory:")) GTEST_SKIP() << "no cgroup v1 memory controller here";
  absl::StatusOr<CgroupMemory> m = ReadCgroupMemory("/sys/fs/cgroup", *self);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->version, 1);
  EXPECT_TRUE(absl::StartsWith(m->dir, "/sys/fs/cgroup/memory")) << m->dir;
  // This process's own memory is charged there.
  EXPECT_GT(m->usage_bytes, 0);
  EXPECT_GT(m->anon_bytes, 0);
  EXPECT_LE(m->working_set_bytes, m->usage_bytes);
  const int64_t limit = FileNumber(m->dir + "/memory.limit_in_bytes");
  EXPECT_EQ(m->limit_bytes, limit >= (int64_t{1} << 62) ? -1 : limit);
}

}  // namespace
}  // namespace exporter
}  // namespace rsslab
