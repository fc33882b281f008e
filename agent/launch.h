// The one launch path: start a program under an allocator profile, wait for
// its ready line, verify the profile took effect, and only then hand it to
// the caller. rsslab_agent (servers over RPC), rsslab_run (one server from a
// shell) and the loadgen's --local (a sweep's cells without an agent) all
// start servers through StartVerifiedServer, so the flag allowlist
// (common/server_flags.h), the ready-line wait and VerifyLaunch are the
// same for all three.
//
// Example (what --local does per cell):
//
//   rsslab::launch::LaunchOptions o;
//   o.program = "/path/rsslab_server";
//   o.profile = profile;                       // required, not owned
//   o.name = "local-0003-glibc-t4";            // in messages and the log's header
//   o.fixed_args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
//                   "--threads=4", "--handler=/path/web_worker.py"};
//   o.flags = {{"cache_limit_mb", "200"}};     // checked as FlagSource::kRequest
//   o.log_path = "/tmp/logs/local-0003-glibc-t4.log";
//   absl::StatusOr<rsslab::launch::Started> s = rsslab::launch::StartVerifiedServer(o);
//   if (!s.ok()) return s.status();            // the server is gone; the message says why
//   UseServer(s->verified.ready.control_address);
//   rsslab::launch::StopStarted(*s, absl::Seconds(5));
//
// The program is a parameter: a user's own program can be launched the
// same way with `flag_check = FlagCheck::kNone` (its arguments are its
// own), `ready_match` / `ready_port` saying how it shows it is ready, and
// `verify = Verify::kProfileOnly` (it has no Control service to ask);
// agent/commands.h Configure sets all of these for an --allow_command.
#ifndef RSSLAB_AGENT_LAUNCH_H_
#define RSSLAB_AGENT_LAUNCH_H_

#include <sys/types.h>

#include <memory>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "agent/log_cap.h"
#include "agent/profiles.h"
#include "agent/readiness.h"
#include "agent/output_pump.h"
#include "agent/spawn.h"
#include "agent/verify_launch.h"
#include "common/auth.h"
#include "common/ready_line.h"
#include "common/server_flags.h"
#include "proto/profile.pb.h"

namespace rsslab {
namespace launch {

// Who forks the child and waits for it. The default (LaunchOptions::child
// empty) is OwnChild: a thread per child waiting for its pid. The agent
// reaps every child on one thread (waitpid(-1)) and records each pid before
// that thread can see it, so it brings its own.
class Child {
 public:
  virtual ~Child() = default;
  // fork + exec (launch::Spawn), the pid registered with whoever reaps it.
  virtual absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) = 0;
  // Waits up to `timeout` for the child to have been reaped; true if it was.
  virtual bool AwaitExit(absl::Duration timeout) = 0;
  // A helper process this child's output goes through (the log writer):
  // SpawnOptions::detach, the middle process reaped like the child.
  virtual absl::StatusOr<pid_t> SpawnDetached(const SpawnOptions& options) = 0;
  // Sends `sig` while the pid is still this child (never to a reused pid).
  virtual void Signal(int sig) = 0;
  // "exited 1", "killed by SIGKILL"; valid once AwaitExit returned true.
  virtual std::string ExitDescription() = 0;
};

// A child the launcher itself waits for (rsslab_run, --local).
class OwnChild : public Child {
 public:
  OwnChild() = default;
  ~OwnChild() override;  // SIGKILLs a child still running, then joins
  absl::StatusOr<pid_t> Spawn(const SpawnOptions& options) override;
  absl::StatusOr<pid_t> SpawnDetached(const SpawnOptions& options) override;
  bool AwaitExit(absl::Duration timeout) override;
  void Signal(int sig) override;
  std::string ExitDescription() override;
  // The waitpid status; valid once AwaitExit returned true.
  int wait_status() const { return wait_status_; }

 private:
  pid_t pid_ = -1;
  absl::Notification exited_;
  int wait_status_ = 0;  // written before exited_ is notified
  std::thread waiter_;
};

// Where the child's stdout goes and where its ready line is read.
enum class Output {
  // stdout through a pipe to the launcher, which spots the ready line and
  // copies the rest to the log (or to `forward_stdout_fd`); stderr straight
  // to the log. For launchers that outlive the output (rsslab_run, --local).
  kPipe,
  // stdout and stderr into the log, the ready line read back from it. For
  // a launcher its children outlive (the agent): a pipe to the launcher
  // would break when it dies, and the server's next write would fail. With
  // LaunchOptions::log_max_bytes, a log writer process of its own
  // (agent/log_cap.h) holds the pipe and caps the log; without, the
  // program writes the file itself.
  kLogFile,
};

// What the launcher checks once the ready line is there.
enum class Verify {
  // The ready line parses (common/ready_line.h), /proc/PID shows the
  // profile's library and environment, and the allocator the server
  // reports over Control matches (VerifyLaunch). For rsslab_server.
  kProfileAndControl,
  // /proc/PID only: for a program without rsslab's Control service.
  kProfileOnly,
};

struct LaunchOptions {
  std::string program;                 // required: the binary to execute
  const v1::Profile* profile = nullptr;  // required, not owned
  // In messages and in the log's first line: "server NAME (pid P) killed: ...".
  std::string name = "server";
  // Arguments the launcher itself decided (listen addresses, threads, the
  // handler's path, credentials), passed first and not checked.
  std::vector<std::string> fixed_args;
  // Server flags from a request, a scenario or a command line, each checked
  // against common/server_flags.h as `flag_check` says before anything
  // starts, then passed as --name=value.
  std::vector<std::pair<std::string, std::string>> flags;
  enum class FlagCheck {
    kRequest,   // FlagSource::kRequest: the agent's allowlist
    kOperator,  // FlagSource::kOperator: every server flag, range-checked
    kNone,      // not rsslab_server: its arguments are its own
  };
  FlagCheck flag_check = FlagCheck::kRequest;
  // The environment the profile's variables are applied to (BuildLaunchEnv).
  profiles::Env base_env = profiles::CurrentEnviron();

  Output output = Output::kPipe;
  // The log (created, truncated): stderr always, stdout too unless
  // forwarded. Empty only with kPipe and forward_stdout_fd: then stderr is
  // inherited and failures carry no log tail.
  std::string log_path;
  // Lines written at the top of the log before the child starts (each
  // ending in '\n'): what was run, for whoever reads the log later.
  std::string log_header;
  // kPipe: copy stdout here instead of into the log (rsslab_run: its own
  // stdout). The ready line is then withheld: the caller prints it once
  // verified, so whoever waits for it never meets an unverified server.
  int forward_stdout_fd = -1;
  // kLogFile: the log's cap in bytes (at least kMinLogCapBytes; 0: none),
  // and the binary that runs as its writer (one whose main() starts with
  // RunLogWriterIfAsked; the agent: itself, /proc/self/exe).
  int64_t log_max_bytes = 0;
  std::string log_writer_binary;

  // When the child is ready: once a line of its output matches
  // `ready_match` (rsslab's ready line by default; empty: no line is
  // awaited) and then, with `ready_port` > 0, `ready_host:ready_port`
  // accepts a TCP connection; both within `ready_timeout`.
  LineMatch ready_match = LineMatch::Prefix(kReadyPrefix);
  std::string ready_host = "127.0.0.1";
  int ready_port = 0;
  absl::Duration ready_timeout = absl::Seconds(60);
  Verify verify = Verify::kProfileAndControl;
  // TLS and the token for the Control check (not owned; may be null).
  const Security* security = nullptr;

  // SpawnOptions passed through: the child's CPUs (empty: the parent's) and
  // PR_SET_PDEATHSIG (0: none; see SpawnOptions for which thread may fork).
  std::vector<int> cpus;
  int parent_death_signal = 0;
  // Who forks and reaps; empty: an OwnChild.
  std::shared_ptr<Child> child;
};

// A started, verified program.
struct Started {
  pid_t pid = -1;
  std::string ready_line;   // as the program printed it, without '\n' ("" if none awaited)
  VerifiedLaunch verified;  // ready (kProfileAndControl only) and /proc facts
  std::string log_path;
  std::shared_ptr<Child> child;
  std::unique_ptr<OutputPump> pump;  // kPipe: still copying its stdout
  // kLogFile with a cap: tells when the log writer has the whole output.
  std::shared_ptr<LogWriterDone> log_writer;
};

// What the child is given, built in one place so that what a log header
// shows of a launch is what was run. LaunchEnv: the profile's variables
// over `base_env` (profiles::BuildLaunchEnv). LaunchArgs: `fixed_args`,
// then each of `flags` as --name=value (unchecked: StartVerifiedServer
// checks them first).
profiles::Env LaunchEnv(const LaunchOptions& options);
std::vector<std::string> LaunchArgs(const LaunchOptions& options);

// Checks the flags, starts the program under the profile, waits for the
// ready line and verifies. On any failure the child is killed and reaped
// before this returns, and the status says which step failed:
// INVALID_ARGUMENT (a flag), ABORTED (it exited before it was ready, with
// its exit and the log's last lines), DEADLINE_EXCEEDED (not ready in
// time), FAILED_PRECONDITION (the profile did not take effect), UNAVAILABLE
// (it did not answer over Control), INTERNAL (the ready line did not parse).
absl::StatusOr<Started> StartVerifiedServer(const LaunchOptions& options);

// How long a launcher waits, once the program has ended, for its log writer
// to have written the last of its output (a program's own child that
// still holds its stdout keeps the writer going longer).
inline constexpr absl::Duration kLogDrainTimeout = absl::Seconds(2);

// SIGTERM, SIGKILL after `grace`; returns once reaped and its output
// drained (in the log, up to kLogDrainTimeout for a capped log). True if it exited within the grace period.
bool StopStarted(Started& started, absl::Duration grace);

// The handler NAME.py in the first of `dirs` holding it (NAME empty: the
// shipped default). INVALID_ARGUMENT for a name that is a path,
// NOT_FOUND naming what is available otherwise.
absl::StatusOr<std::string> FindHandler(const std::string& name,
                                        const std::vector<std::string>& dirs);
// The NAME of every NAME.py handler in `dirs`, sorted.
std::vector<std::string> HandlersIn(const std::vector<std::string>& dirs);

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_LAUNCH_H_
