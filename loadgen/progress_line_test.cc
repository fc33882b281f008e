#include "loadgen/progress_line.h"

#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ProgressLineTest, FormatShowsDoneOfTargetQpsP99ErrorsAndRss) {
  LiveProgress p;
  p.running = true;
  p.done = 51234;
  p.target = 96000;
  p.failed = 2;
  p.p99_us = 2310;
  EXPECT_EQ(ProgressLine::Format("1/10", "fill", p, 8123.4, 88.06, 0),
            "[1/10] fill  51234/96000 done  8123 qps  p99 2.31 ms  errors 2  server rss 88.1 MiB");
  // By duration (no target) and no answer from the server yet.
  p.target = 0;
  EXPECT_EQ(ProgressLine::Format("2/3", "load", p, 0, -1, 0),
            "[2/3] load  51234 done  0 qps  p99 2.31 ms  errors 2  server rss -");
}

TEST(ProgressLineTest, FormatCutsALineWiderThanTheTerminal) {
  LiveProgress p;
  p.running = true;
  p.done = 7;
  const std::string full = ProgressLine::Format("1/1", "fill", p, 1, 1, 0);
  ASSERT_GT(full.size(), 20u);
  // One column short of the width: a full-width line would wrap.
  EXPECT_EQ(ProgressLine::Format("1/1", "fill", p, 1, 1, 20), full.substr(0, 19));
  EXPECT_EQ(ProgressLine::Format("1/1", "fill", p, 1, 1, full.size() + 1), full);
  EXPECT_EQ(ProgressLine::Format("1/1", "fill", p, 1, 1, full.size()),
            full.substr(0, full.size() - 1));
  // A width of 1 or unknown cannot be honoured: the line is left whole.
  EXPECT_EQ(ProgressLine::Format("1/1", "fill", p, 1, 1, 1), full);
}

// The thread: rewrites the line in place ("\r\033[K"), skips samples while
// the engine has no run, asks for the RSS at most once per rss_period and
// keeps its last answer, and asks the width before every update.
TEST(ProgressLineTest, UpdatesInPlaceOnlyWhileTheEngineRuns) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  ASSERT_NE(out, nullptr);
  std::atomic<int> samples{0};
  std::atomic<int> rss_calls{0};
  std::atomic<int> width_calls{0};
  absl::Notification enough;
  {
    ProgressLine::Options o;
    o.period = absl::Milliseconds(1);
    o.rss_period = absl::Hours(1);
    o.out = out;
    o.width = [&] {
      ++width_calls;
      return 200;
    };
    ProgressLine live(
        "3/10", "shrink",
        [&] {
          const int n = ++samples;
          LiveProgress p;
          p.running = n > 2;  // the first two: still connecting
          p.done = 100 * n;
          p.target = 1000;
          if (n == 8) enough.Notify();
          return p;
        },
        [&] {
          ++rss_calls;
          return 42.0;
        },
        o);
    enough.WaitForNotification();
  }  // stopped and joined here: `out` is no longer written
  fclose(out);
  const std::string text(buf, len);
  free(buf);
  EXPECT_EQ(rss_calls.load(), 1);
  std::vector<std::string> updates =
      absl::StrSplit(text, "\r\033[K", absl::SkipEmpty());
  ASSERT_GE(updates.size(), 6u) << text;
  EXPECT_THAT(text, Not(HasSubstr("shrink  100/1000")));  // not running: not shown
  EXPECT_THAT(text, Not(HasSubstr("shrink  200/1000")));
  EXPECT_THAT(updates[0], HasSubstr("[3/10] shrink  300/1000 done"));
  for (const std::string& u : updates) {
    EXPECT_THAT(u, HasSubstr("server rss 42.0 MiB")) << u;
    EXPECT_THAT(u, Not(HasSubstr("\n")));
  }
  EXPECT_EQ(width_calls.load(), static_cast<int>(updates.size()));
}

}  // namespace
}  // namespace rsslab
