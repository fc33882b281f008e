// Starts a real rsslab_server (or any binary printing the ready line) for a
// test, waits for readiness (never sleeps), and stops it.
//
// Example:
//   ServerProcess::Options o;
//   o.binary = ServerProcess::Runfile("server/rsslab_server");
//   o.args = {"--threads=4", "--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0"};
//   auto server = ServerProcess::Start(o);   // absl::StatusOr<unique_ptr>
//   ASSERT_TRUE(server.ok()) << server.status();
//   (*server)->data_address();   // "127.0.0.1:41234"
//   int code = (*server)->Stop();  // SIGTERM, wait; exit status

#ifndef RSSLAB_TESTS_SERVER_PROCESS_H_
#define RSSLAB_TESTS_SERVER_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rsslab {
namespace testing {

class ServerProcess {
 public:
  struct Options {
    std::string binary;
    std::vector<std::string> args;
    // Added to (or overriding) the test's environment.
    std::map<std::string, std::string> env;
    absl::Duration ready_timeout = absl::Seconds(60);
    // The line that means "ready"; its KEY=VALUE words become Field()s.
    // rsslab_agent prints "rsslab_agent ready listen=HOST:PORT pid=PID".
    std::string ready_prefix = "rsslab_server ready ";
  };

  // Path of a data dependency, e.g. "server/rsslab_server" (workspace
  // relative), through the Bazel runfiles library.
  static std::string Runfile(const std::string& path);

  // Options for rsslab_server on loopback ports with the test handler
  // (tests/handlers/test_handler.py), plus `extra` flags.
  static Options TestServer(std::vector<std::string> extra = {});

  // Starts the binary and waits for "rsslab_server ready ..." on stdout. If
  // the process exits first, the error carries its exit status and stderr.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(const Options& options);

  // Runs a binary to completion; returns exit status (or -signal), with
  // stdout/stderr captured.
  struct Result {
    int exit_code = -1;
    std::string out;
    std::string err;
  };
  static Result Run(const std::string& binary, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env = {},
                    absl::Duration timeout = absl::Seconds(120));

  ~ServerProcess();  // kills if still running

  const std::string& data_address() const { return data_; }
  const std::string& control_address() const { return control_; }
  // From " metrics=HOST:PORT" in the ready line; empty without --metrics_listen.
  const std::string& metrics_address() const { return metrics_; }
  pid_t pid() const { return pid_; }
  // A KEY=VALUE word of the ready line ("" if absent), e.g. Field("listen").
  std::string Field(const std::string& key) const;

  // Sends `sig` and waits up to `timeout`; returns the exit code, or
  // 128+signal if killed by a signal, or -1 on timeout (then SIGKILLs).
  int Stop(int sig = 15, absl::Duration timeout = absl::Seconds(30));
  // Waits for exit without signalling (for processes expected to die).
  int Wait(absl::Duration timeout);
  bool Running();
  // Everything the process wrote to stderr so far.
  std::string Stderr();

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  int exit_ = -1;
  bool reaped_ = false;
  std::string data_, control_, metrics_;
  std::map<std::string, std::string> fields_;
  std::string stderr_path_;
  int stdout_fd_ = -1;
};

}  // namespace testing
}  // namespace rsslab

#endif  // RSSLAB_TESTS_SERVER_PROCESS_H_
