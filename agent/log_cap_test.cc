#include "agent/log_cap.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace launch {
namespace {

std::string TmpPath(const std::string& name) {
  const char* d = getenv("TEST_TMPDIR");
  return absl::StrCat(d ? d : "/tmp", "/", name);
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string Line(int i) { return absl::StrCat("line ", i, " ", std::string(i % 37, 'x'), "\n"); }

// Lines in pieces of random sizes (as a pipe delivers them): the file never
// passes the cap, keeps the header and the first lines, ends with the last
// line, and its one marker counts exactly the bytes of the lines missing.
TEST(CappedLog, KeepsHeadAndTailUnderTheCapAndCountsWhatItDrops) {
  const std::string path = TmpPath("capped.log");
  const std::string header = "# rsslab_agent s0001: /bin/prog --port=1\n";
  { std::ofstream(path) << header; }
  const int64_t cap = kMinLogCapBytes;
  absl::StatusOr<std::unique_ptr<CappedLog>> log = CappedLog::Open(path, cap);
  ASSERT_TRUE(log.ok()) << log.status();
  constexpr int kLines = 200000;  // ~9 MB: several cuts
  std::string stream;
  for (int i = 1; i <= kLines; ++i) stream += Line(i);
  std::mt19937 rng(7);
  size_t at = 0;
  int cuts_seen = 0;
  int64_t last_dropped = 0;
  while (at < stream.size()) {
    const size_t n = std::min<size_t>(stream.size() - at, 1 + rng() % kLogWriterChunk);
    (*log)->Append(absl::string_view(stream).substr(at, n));
    at += n;
    ASSERT_LE((*log)->size(), cap);
    ASSERT_EQ(FileSize(path), (*log)->size());
    if ((*log)->dropped() != last_dropped) ++cuts_seen;
    last_dropped = (*log)->dropped();
  }
  EXPECT_GE(cuts_seen, 5);
  const std::string text = ReadAll(path);
  ASSERT_TRUE(absl::StartsWith(text, header + Line(1) + Line(2)));
  ASSERT_TRUE(absl::EndsWith(text, Line(kLines)));
  // Whole lines only, in order: the head's, one marker, the tail's.
  std::vector<std::string> lines =
      absl::StrSplit(absl::string_view(text).substr(header.size()), '\n', absl::SkipEmpty());
  int marker_at = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], kDroppedMarker)) {
      ASSERT_EQ(marker_at, -1) << "two markers";
      marker_at = static_cast<int>(i);
    }
  }
  ASSERT_GT(marker_at, 0);
  EXPECT_TRUE(absl::StrContains(lines[marker_at], "bytes of output dropped here (log capped at 1 MiB)"))
      << lines[marker_at];
  int64_t said = 0;
  const std::vector<std::string> words =
      absl::StrSplit(absl::StripPrefix(lines[marker_at], kDroppedMarker), ' ');
  ASSERT_TRUE(absl::SimpleAtoi(words[0], &said)) << lines[marker_at];
  EXPECT_EQ(said, (*log)->dropped());
  auto number = [](const std::string& l) {
    int n = 0;
    std::vector<std::string> w = absl::StrSplit(l, ' ');
    EXPECT_TRUE(w.size() >= 2 && absl::SimpleAtoi(w[1], &n)) << l;
    return n;
  };
  for (int i = 0; i < marker_at; ++i) ASSERT_EQ(number(lines[i]), i + 1);
  const int first_tail = number(lines[marker_at + 1]);
  for (size_t i = marker_at + 1; i < lines.size(); ++i) {
    ASSERT_EQ(number(lines[i]), first_tail + static_cast<int>(i - marker_at - 1));
  }
  int64_t missing = 0;
  for (int i = marker_at + 1; i < first_tail; ++i) missing += Line(i).size();
  EXPECT_EQ(said, missing);
  // At least a quarter of the cap of the newest output is kept.
  EXPECT_GE(static_cast<int64_t>(text.size() - text.find(lines[marker_at + 1])), cap / 4 - 200);
}

TEST(CappedLog, UnderTheCapNothingChanges) {
  const std::string path = TmpPath("small.log");
  absl::StatusOr<std::unique_ptr<CappedLog>> log = CappedLog::Open(path, kMinLogCapBytes);
  ASSERT_TRUE(log.ok()) << log.status();
  (*log)->Append("one\n");
  (*log)->Append("two");
  EXPECT_EQ(ReadAll(path), "one\ntwo");
  EXPECT_EQ((*log)->dropped(), 0);
}

TEST(CappedLog, OneEndlessLineIsCutToo) {
  const std::string path = TmpPath("oneline.log");
  absl::StatusOr<std::unique_ptr<CappedLog>> log = CappedLog::Open(path, kMinLogCapBytes);
  ASSERT_TRUE(log.ok()) << log.status();
  const std::string chunk(kLogWriterChunk, 'y');
  for (int i = 0; i < 64; ++i) (*log)->Append(chunk);  // 4 MiB, no newline
  (*log)->Append("END");
  EXPECT_LE(FileSize(path), kMinLogCapBytes);
  const std::string text = ReadAll(path);
  EXPECT_TRUE(absl::EndsWith(text, "yyyEND"));
  EXPECT_TRUE(absl::StrContains(text, std::string("y\n") + kDroppedMarker));
}

TEST(CappedLog, ACapBelowTheMinimumIsRefused) {
  absl::StatusOr<std::unique_ptr<CappedLog>> log = CappedLog::Open(TmpPath("tiny.log"), 4096);
  ASSERT_FALSE(log.ok());
  EXPECT_TRUE(absl::StrContains(log.status().message(), "below the minimum")) << log.status();
}

}  // namespace
}  // namespace launch
}  // namespace rsslab
