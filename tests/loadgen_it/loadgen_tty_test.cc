// rsslab_loadgen's live progress line, seen the way a user sees it: the real
// loadgen runs with its stdout and stderr on a pseudo-terminal (forkpty),
// against a real rsslab_server, and the test reads what the terminal got.
//
// The terminal is put in raw mode so the bytes read are exactly the bytes
// written (no "\n" -> "\r\n" translation hiding a missing carriage return).
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// What a child wrote to its terminal, and how it ended.
struct TtyRun {
  int exit_code = -1;  // or 128+signal; -1 if it had to be killed
  std::string bytes;
};

// Runs `bin args` on a fresh pseudo-terminal of `cols` columns and collects
// everything it writes until it exits (or `timeout`, then SIGKILL).
TtyRun RunOnTty(const std::string& bin, const std::vector<std::string>& args,
                int cols, absl::Duration timeout) {
  TtyRun run;
  termios raw{};
  cfmakeraw(&raw);
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = static_cast<unsigned short>(cols);
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, &raw, &ws);
  if (pid < 0) {
    ADD_FAILURE() << "forkpty: " << strerror(errno);
    return run;
  }
  if (pid == 0) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  // Read until the slave side is closed by the child's exit (EIO on Linux).
  const absl::Time end = absl::Now() + timeout;
  char buf[4096];
  while (absl::Now() < end) {
    pollfd p{master, POLLIN, 0};
    const int n = poll(&p, 1, 100);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    const ssize_t got = read(master, buf, sizeof(buf));
    if (got > 0) {
      run.bytes.append(buf, got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    break;  // EIO / EOF: every copy of the slave is closed
  }
  int st = 0;
  pid_t w = waitpid(pid, &st, WNOHANG);
  if (w == 0) {
    // Still running although its terminal is gone or the time is up.
    const absl::Time kill_at = absl::Now() + absl::Seconds(5);
    while (w == 0 && absl::Now() < kill_at) {
      absl::SleepFor(absl::Milliseconds(20));
      w = waitpid(pid, &st, WNOHANG);
    }
    if (w == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      close(master);
      return run;  // exit_code stays -1
    }
  }
  close(master);
  run.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return run;
}

// One live update: the text between "\r\033[K" and the next "\r" or "\n".
struct LiveUpdate {
  std::string text;
  uint64_t done = 0;
};

// Parses "... <done>/<target> done ..." or "... <done> done ...".
bool ParseDone(absl::string_view text, uint64_t* done) {
  const size_t d = text.find(" done");
  if (d == absl::string_view::npos) return false;
  size_t b = text.rfind(' ', d - 1);
  b = (b == absl::string_view::npos) ? 0 : b + 1;
  absl::string_view num = text.substr(b, d - b);
  num = num.substr(0, num.find('/'));
  return absl::SimpleAtoi(num, done);
}

class LoadgenTtyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerProcess::Options o;
    o.binary = ServerProcess::Runfile("server/rsslab_server");
    o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
              "--threads=2",
              "--handler=" + ServerProcess::Runfile("tests/handlers/noop.py")};
    auto s = ServerProcess::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  std::vector<std::string> Args(const std::string& out) {
    // An open loop at a fixed rate makes the step last a known time (3 s),
    // long enough for several 0.5 s live updates on a loaded machine.
    return {"--target=" + server_->data_address(),
            "--control=" + server_->control_address(),
            "--rate=1000", "--requests=3000", "--channels=2",
            "--out=" + out};
  }

  std::unique_ptr<ServerProcess> server_;
};

std::string Tmp(const std::string& name) {
  return absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
}

TEST_F(LoadgenTtyTest, LiveLineIsUpdatedInPlaceThenReplacedByTheStepLine) {
  constexpr int kCols = 200;
  TtyRun run = RunOnTty(ServerProcess::Runfile("loadgen/rsslab_loadgen"),
                        Args(Tmp("tty_run")), kCols, absl::Seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.bytes;
  const std::string& out = run.bytes;

  // Every live update starts with carriage return + erase-line, and none of
  // them ends with a newline (the next update overwrites it in place).
  const std::string kLive = "\r\033[K";
  std::vector<LiveUpdate> updates;
  std::string final_line;
  for (size_t pos = out.find(kLive); pos != std::string::npos;
       pos = out.find(kLive, pos + 1)) {
    const size_t b = pos + kLive.size();
    const size_t e = out.find_first_of("\r\n", b);
    ASSERT_NE(e, std::string::npos) << "live output ends mid-line: " << out;
    const std::string text = out.substr(b, e - b);
    if (out[e] == '\n') {
      // A permanent line printed over the live one (start / end of a step).
      if (absl::StrContains(text, ": load ok")) final_line = text;
      continue;
    }
    LiveUpdate u;
    u.text = text;
    ASSERT_TRUE(ParseDone(text, &u.done)) << text;
    updates.push_back(u);
  }
  ASSERT_GE(updates.size(), 2u) << "expected several live updates: " << out;
  for (const LiveUpdate& u : updates) {
    SCOPED_TRACE(u.text);
    EXPECT_THAT(u.text, HasSubstr("] load"));  // the step name
    EXPECT_THAT(u.text, HasSubstr("/3000 done"));
    EXPECT_THAT(u.text, ::testing::ContainsRegex(" [0-9]+ qps"));
    // A rate, not an unsigned wrap-around (e.g. a tick after the step).
    const size_t q = u.text.find(" qps");
    double qps = -1;
    ASSERT_NE(q, std::string::npos);
    const size_t qb = u.text.rfind(' ', q - 1) + 1;
    ASSERT_TRUE(absl::SimpleAtod(u.text.substr(qb, q - qb), &qps));
    EXPECT_LT(qps, 1e6);
    EXPECT_THAT(u.text, ::testing::ContainsRegex("p99 [0-9]+\\.[0-9]+ ms"));
    EXPECT_THAT(u.text, HasSubstr("errors 0"));
    // The line must fit the terminal, or "\r" only returns to the start of
    // the last wrapped row and every update leaves a stale row behind.
    EXPECT_LE(u.text.size(), static_cast<size_t>(kCols - 1));
    EXPECT_THAT(u.text, Not(HasSubstr("\n")));
  }
  // Requests done only grows and reaches well into the step.
  for (size_t i = 1; i < updates.size(); ++i) {
    EXPECT_GE(updates[i].done, updates[i - 1].done);
  }
  EXPECT_GT(updates.back().done, updates.front().done);
  EXPECT_GT(updates.back().done, 0u);
  // The server's RSS comes from the control service (a real number).
  EXPECT_THAT(updates.back().text,
              ::testing::ContainsRegex("rss [0-9]+\\.[0-9] MiB"));

  // The step's final line replaces the live line, with exact counts.
  EXPECT_THAT(final_line, HasSubstr("3000 ok, 0 failed"));
  const size_t last_update = out.rfind(updates.back().text);
  const size_t final_pos = out.find(final_line);
  EXPECT_LT(last_update, final_pos) << "a live update after the final line";
  // Nothing live is printed after the step's final line.
  EXPECT_EQ(out.find(" qps  p99", final_pos + final_line.size()),
            std::string::npos)
      << out.substr(final_pos);
  EXPECT_EQ(server_->Stop(), 0);
}

TEST_F(LoadgenTtyTest, NarrowTerminalGetsALineThatFits) {
  constexpr int kCols = 60;
  TtyRun run = RunOnTty(ServerProcess::Runfile("loadgen/rsslab_loadgen"),
                        Args(Tmp("tty_narrow")), kCols, absl::Seconds(60));
  ASSERT_EQ(run.exit_code, 0) << run.bytes;
  const std::string kLive = "\r\033[K";
  int updates = 0;
  for (size_t pos = run.bytes.find(kLive); pos != std::string::npos;
       pos = run.bytes.find(kLive, pos + 1)) {
    const size_t b = pos + kLive.size();
    const size_t e = run.bytes.find_first_of("\r\n", b);
    ASSERT_NE(e, std::string::npos);
    if (run.bytes[e] == '\n') continue;
    ++updates;
    // Wider than the terminal would wrap and leave stale rows behind.
    EXPECT_LE(e - b, static_cast<size_t>(kCols - 1))
        << run.bytes.substr(b, e - b);
  }
  EXPECT_GE(updates, 2) << run.bytes;
}

TEST_F(LoadgenTtyTest, NoTtyMeansNoLiveLine) {
  auto r = ServerProcess::Run(ServerProcess::Runfile("loadgen/rsslab_loadgen"),
                              Args(Tmp("notty")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("\r")));
  EXPECT_THAT(r.err, HasSubstr("3000 ok, 0 failed"));
}

}  // namespace
}  // namespace rsslab
