// Process plumbing shared by rsslab_run (one server under a profile, from a
// shell) and rsslab_agent (servers over RPC): fork/exec with an exact
// environment, a thread that copies the child's stdout somewhere and spots
// the ready line, exit-status text, log tails, and asking the server which
// allocator it sees.
//
// Example:
//
//   int out[2];
//   pipe2(out, O_CLOEXEC);
//   rsslab::launch::SpawnOptions so;
//   so.binary = "/path/rsslab_server";
//   so.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0"};
//   so.env = rsslab::profiles::EnvStrings(env);
//   so.stdout_fd = out[1];
//   absl::StatusOr<pid_t> pid = rsslab::launch::Spawn(so);
//   close(out[1]);
//   rsslab::launch::OutputPump pump(out[0], /*sink_fd=*/log_fd, /*own_sink=*/true,
//                                   rsslab::launch::LineMatch::Prefix(rsslab::kReadyPrefix),
//                                   /*withhold_ready=*/false);
//   rsslab::launch::OutputPump::Result r = pump.WaitReady(absl::Seconds(60));
//   if (r.state == rsslab::launch::OutputPump::kReady) { auto rl = rsslab::ParseReadyLine(r.line); }
#ifndef RSSLAB_AGENT_SPAWN_H_
#define RSSLAB_AGENT_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/profiles.h"
#include "agent/readiness.h"
#include "common/auth.h"
#include "common/ready_line.h"
#include "proto/profile.pb.h"

namespace rsslab {
namespace launch {

struct SpawnOptions {
  std::string binary;
  std::vector<std::string> args;  // without argv[0]
  std::vector<std::string> env;   // the complete environment, NAME=value
  int stdin_fd = -1;              // -1: /dev/null
  int stdout_fd = -1;             // -1: inherit
  int stderr_fd = -1;             // -1: inherit
  // Own process group: a terminal's Ctrl-C reaches only the launcher, which
  // then stops the server in order (the agent), or forwards it (rsslab_run).
  bool new_process_group = true;
  // PR_SET_PDEATHSIG: fires when the forking *thread* exits, so only for a
  // launcher that forks from its main thread (rsslab_run), never from an RPC
  // thread.
  int parent_death_signal = 0;
  // CPUs the child (and every thread it makes) may run on; empty: the
  // parent's. Set before exec, so the server never runs elsewhere.
  std::vector<int> cpus;
  // A process nobody waits for (the log writer): forked twice, so the
  // program runs as an orphan in a session of its own, and the pid returned
  // is the middle process's, which exits at once and which the caller's
  // reaper collects like any child.
  bool detach = false;
  // The child's working directory; empty: the parent's.
  std::string cwd;
};

// fork + execve. An exec failure (no such binary, not executable) comes back
// as an error here, through a close-on-exec pipe, not as a child exit 127.
// Every descriptor the caller wants closed in the child must be O_CLOEXEC.
absl::StatusOr<pid_t> Spawn(const SpawnOptions& options);

// Copies a child's stdout (a pipe) to `sink_fd` on its own thread and
// recognises the ready line. Reads until EOF (the child exited or closed
// stdout), so the child never blocks on a full pipe or gets SIGPIPE.
class OutputPump {
 public:
  enum State { kWaiting, kReady, kEof, kTimeout };
  struct Result {
    State state;
    std::string line;  // the ready line, without '\n'
  };

  // Takes ownership of read_fd (and sink_fd if own_sink). sink_fd -1 drops
  // the output. `ready` says which line is the ready line (empty: none,
  // the output is only copied). With withhold_ready, the ready line is not
  // copied: the caller prints it once it has verified the process.
  OutputPump(int read_fd, int sink_fd, bool own_sink, LineMatch ready, bool withhold_ready);
  ~OutputPump();  // stops copying and joins, even if the child still runs
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Until the ready line, EOF, or the timeout.
  Result WaitReady(absl::Duration timeout);
  // Until EOF (or timeout); true at EOF.
  bool WaitEof(absl::Duration timeout);

 private:
  void Run();

  int read_fd_;
  int sink_fd_;
  bool own_sink_;
  int wake_[2] = {-1, -1};
  const LineMatch ready_match_;
  const bool withhold_;
  absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  std::string line_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

// What VerifyLaunch established about a started server.
struct VerifiedLaunch {
  ReadyLine ready;
  profiles::Verification verification;
};

// The one check both launchers (rsslab_run and the agent) make once a
// server printed its ready line: the line parses, /proc/PID shows the
// profile's library and environment, and the allocator the server itself
// reports over Control matches. The code says which step failed: INTERNAL
// (the line), FAILED_PRECONDITION (the profile did not take effect),
// UNAVAILABLE (the server did not answer). `security` may be null.
absl::StatusOr<VerifiedLaunch> VerifyLaunch(pid_t pid, const v1::Profile& profile,
                                            absl::string_view ready_line,
                                            const Security* security,
                                            absl::Duration rpc_timeout = absl::Seconds(10));

// "exited 0", "exited 1", "killed by SIGKILL", from a waitpid status.
std::string DescribeExit(int wait_status);

// The last `max_lines` lines of a file (at most the last 8 KiB of it).
std::string LogTail(const std::string& path, int max_lines = 20);

// GetSnapshot over the Control service: the allocator the server reports.
// `security` (optional) supplies TLS and the token when the server needs them.
absl::StatusOr<std::string> ReportedAllocator(const std::string& control_address,
                                              absl::Duration timeout,
                                              const Security* security = nullptr);

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_SPAWN_H_
