#include "loadgen/results/event_log.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "loadgen/results/results_testing.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(EventLogTest, EventLogWritesOneFlushedJsonLinePerRecord) {
  const std::string dir = TmpDir("run_a/nested");
  auto log = EventLog::Create(dir, false);
  ASSERT_TRUE(log.ok()) << log.status();
  auto events = SeedLikeRun(true);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*log)->Append(events[i]).ok());
    // Flushed at once: readable before the log is closed.
    int skipped = 0;
    auto back = ReadEvents(dir, &skipped);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->size(), i + 1);
  }
  std::ifstream in(dir + "/events.jsonl");
  std::string line;
  std::getline(in, line);
  EXPECT_THAT(line, HasSubstr("\"scenario_name\":\"seed\""));  // proto names
  EXPECT_THAT(line, HasSubstr("\"seq\""));
  EXPECT_THAT(line, Not(HasSubstr("\n")));
  // A second run never appends to the first one's records.
  EXPECT_FALSE(EventLog::Create(dir, false).ok());
}

// A disk that fills up (here: RLIMIT_FSIZE in a child) fails the append
// with a clear error and leaves only whole records behind.
TEST(EventLogTest, FullDiskFailsCleanlyAndKeepsEveryLineValid) {
  const std::string dir = TmpDir("run_full");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    rlimit lim{6000, 6000};
    setrlimit(RLIMIT_FSIZE, &lim);
    auto log = EventLog::Create(dir, false);
    if (!log.ok()) _exit(3);
    for (int i = 0; i < 1000; ++i) {
      for (Event e : SeedLikeRun(true)) {
        absl::Status s = (*log)->Append(e);
        if (!s.ok()) {
          bool named = std::string(s.message()).find("File too large") != std::string::npos &&
                       std::string(s.message()).find("events.jsonl") != std::string::npos;
          // A later append must not resurrect the torn record either.
          (void)(*log)->Append(e);
          _exit(named ? 0 : 4);
        }
      }
    }
    _exit(5);  // never hit the limit
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(dir + "/events.jsonl");
  std::string line;
  int lines = 0;
  uint64_t last_seq = 0;
  while (std::getline(in, line)) {
    Event e;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &e).ok()) << line;
    EXPECT_EQ(e.seq(), last_seq + 1);
    last_seq = e.seq();
    ++lines;
  }
  EXPECT_GT(lines, 0);
  int skipped = -1;
  auto events = ReadEvents(dir, &skipped);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(skipped, 0);
}

TEST(EventLogTest, TornLastLineIsSkipped) {
  const std::string dir = TmpDir("run_torn");
  {
    auto log = EventLog::Create(dir, false);
    ASSERT_TRUE(log.ok());
    for (const auto& e : SeedLikeRun(false)) ASSERT_TRUE((*log)->Append(e).ok());
  }
  std::ofstream(dir + "/events.jsonl", std::ios::app) << "{\"seq\":\"9\",\"snaps";
  int skipped = 0;
  auto back = ReadEvents(dir, &skipped);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(back->size(), SeedLikeRun(false).size());
}

}  // namespace
}  // namespace rsslab
