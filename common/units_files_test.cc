#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/files.h"
#include "common/units.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

TEST(Units, MiBEdges) {
  EXPECT_EQ(*MiBToBytes(0, "--x_mb", 0, 100), 0);
  EXPECT_EQ(*MiBToBytes(100, "--x_mb", 0, 100), 100 * kMiB);
  for (int64_t bad : {int64_t{-1}, int64_t{101}, int64_t{17592186044516},
                      std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    auto r = MiBToBytes(bad, "--x_mb", 0, 100);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "between 0 and 100")) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "--x_mb")) << r.status();
  }
  // hi above kMaxMiB is clamped, so the product cannot overflow.
  EXPECT_FALSE(MiBToBytes(kMaxMiB + 1, "--x_mb", 0, std::numeric_limits<int64_t>::max()).ok());
  EXPECT_EQ(*MiBToBytes(kMaxMiB, "--x_mb", 0, std::numeric_limits<int64_t>::max()),
            kMaxMiB * kMiB);
}

TEST(Units, DoubleRefusesNanAndInf) {
  EXPECT_TRUE(CheckRange(0.5, "p", 0.0, 1.0).ok());
  EXPECT_FALSE(CheckRange(std::nan(""), "p", 0.0, 1.0).ok());
  EXPECT_FALSE(CheckRange(INFINITY, "p", 0.0, INFINITY).ok());
  EXPECT_FALSE(CheckRange(-0.1, "p", 0.0, 1.0).ok());
}

TEST(Units, Durations) {
  EXPECT_EQ(*MsToDuration(5, "--t_ms", 0, 10), absl::Milliseconds(5));
  EXPECT_FALSE(MsToDuration(-1, "--t_ms", 0, 10).ok());
  EXPECT_FALSE(CheckDuration(absl::InfiniteDuration(), "--d", absl::ZeroDuration(),
                             absl::Hours(1)).ok());
  EXPECT_TRUE(CheckDuration(absl::Minutes(1), "--d", absl::ZeroDuration(), absl::Hours(1)).ok());
}

TEST(Files, ReadsARegularFile) {
  const std::string p = Tmp() + "/small.txt";
  std::ofstream(p) << "hello";
  auto r = ReadFileBounded(p, 5, "--f");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, "hello");
  auto big = ReadFileBounded(p, 4, "--f");
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(absl::StrContains(big.status().message(), "--f: ")) << big.status();
}

TEST(Files, RefusesDevicesFifosAndDirectories) {
  const std::string fifo = Tmp() + "/fifo";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{"/dev/zero", "character device"},
                                   {fifo, "FIFO"},
                                   {Tmp(), "directory"}}) {
    auto r = ReadFileBounded(path, 1 << 20, "--f");
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_TRUE(absl::StrContains(r.status().message(), kind)) << r.status();
    EXPECT_FALSE(CheckRegularFile(path, 1 << 20, "--f").ok()) << path;
  }
  EXPECT_TRUE(absl::IsNotFound(ReadFileBounded(Tmp() + "/nope", 10, "--f").status()));
}

TEST(Files, PrivateFile) {
  const std::string p = Tmp() + "/secret";
  std::ofstream(p) << "x";
  ASSERT_EQ(chmod(p.c_str(), 0600), 0);
  EXPECT_TRUE(CheckPrivateFile(p, "--t").ok());
  ASSERT_EQ(chmod(p.c_str(), 0644), 0);
  auto s = CheckPrivateFile(p, "--t");
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "chmod 600")) << s;
}

// Every name in `dir` but . and ..
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

std::string FreshDir(const std::string& name) {
  const std::string d = Tmp() + "/" + name;
  mkdir(d.c_str(), 0755);
  for (const std::string& n : Names(d)) unlink((d + "/" + n).c_str());
  return d;
}

TEST(Files, WriteFileAtomicallyWritesAndOverwrites) {
  const std::string dir = FreshDir("write");
  const std::string p = dir + "/summary.md";
  ASSERT_TRUE(WriteFileAtomically(p, "a longer first text\n").ok());
  EXPECT_EQ(*ReadFileBounded(p, 100, "--f"), "a longer first text\n");
  ASSERT_TRUE(WriteFileAtomically(p, "short").ok());  // replaced, not overwritten in place
  EXPECT_EQ(*ReadFileBounded(p, 100, "--f"), "short");
  ASSERT_TRUE(WriteFileAtomically(p, "").ok());
  EXPECT_EQ(*ReadFileBounded(p, 100, "--f"), "");
  EXPECT_EQ(Names(dir), std::vector<std::string>{"summary.md"});  // no temporary left
}

TEST(Files, WriteFileAtomicallyHonoursTheMode) {
  const std::string p = FreshDir("write_mode") + "/state.json";
  std::ofstream(p) << "old";
  ASSERT_EQ(chmod(p.c_str(), 0644), 0);
  ASSERT_TRUE(WriteFileAtomically(p, "{}", 0600).ok());
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // the new file's mode, not the old one's
  EXPECT_TRUE(CheckPrivateFile(p, "--state").ok());
}

TEST(Files, WriteFileAtomicallyNamesThePathAndTheReason) {
  const std::string dir = FreshDir("write_bad");
  const std::string plain = dir + "/plain";
  std::ofstream(plain) << "x";
  ASSERT_EQ(mkdir((dir + "/adir").c_str(), 0755), 0);
  // Tests may run as root, so "unwritable" is a missing directory, a
  // regular file used as a directory, and a directory in the file's place.
  for (const auto& [path, reason] : {std::pair<std::string, std::string>{
                                         dir + "/missing/summary.md", "No such file or directory"},
                                     {plain + "/summary.md", "Not a directory"},
                                     {dir + "/adir", "Is a directory"}}) {
    absl::Status s = WriteFileAtomically(path, "text");
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_EQ(s.message(), "cannot write " + path + ": " + reason);
  }
  std::vector<std::string> names = Names(dir);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"adir", "plain"}));  // temporaries removed
  EXPECT_TRUE(Names(dir + "/adir").empty());
}

}  // namespace
}  // namespace rsslab
