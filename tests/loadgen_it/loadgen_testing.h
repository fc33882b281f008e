// Shared helpers for the loadgen integration tests: paths, run-directory
// readers, and the loadgen as a background child that can be signalled.
//
// Example:
//   Child lg(Loadgen(), {"--builtin=quick", "--out=" + Tmp("run")});
//   ASSERT_TRUE(lg.WaitForStderr("load started", absl::Seconds(30)));
//   kill(lg.pid(), SIGINT);
//   EXPECT_EQ(lg.Wait(absl::Seconds(30)), 130);
//   std::vector<Event> events = Events(Tmp("run"));

#ifndef RSSLAB_TESTS_LOADGEN_IT_LOADGEN_TESTING_H_
#define RSSLAB_TESTS_LOADGEN_IT_LOADGEN_TESTING_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/results.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {

// A path under $TEST_TMPDIR.
std::string Tmp(const std::string& name);
// The rsslab_loadgen binary (runfiles).
std::string Loadgen();
std::string ReadFile(const std::string& path);
// Every line of DIR/events.jsonl; a line that does not parse fails the test.
std::vector<rsslab::v1::Event> Events(const std::string& dir);
// A real rsslab_server on loopback ports with `threads` workers and, when
// given, tests/handlers/`handler`; nullptr (and a failed expectation) if it
// did not start.
std::unique_ptr<ServerProcess> StartServer(int threads = 2, const std::string& handler = "");

// The loadgen (or any binary) as a background child; stdout and stderr go
// to files of their own.
class Child {
 public:
  Child(const std::string& bin, const std::vector<std::string>& args);
  ~Child();  // SIGKILL if still running
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Polls the child's stderr for `text` (a log line is the readiness
  // signal).
  bool WaitForStderr(const std::string& text, absl::Duration timeout);
  // Exit code, 128+signal, or -1 on timeout.
  int Wait(absl::Duration timeout);
  // The reaped child's peak RSS (ru_maxrss) in KiB; 0 before Wait reaps it.
  long max_rss_kb() const { return max_rss_kb_; }
  void Kill();
  pid_t pid() const { return pid_; }
  std::string Stdout() const { return ReadFile(out_path_); }
  std::string Stderr() const { return ReadFile(err_path_); }

 private:
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  long max_rss_kb_ = 0;
};

}  // namespace testing
}  // namespace rsslab

#endif  // RSSLAB_TESTS_LOADGEN_IT_LOADGEN_TESTING_H_
