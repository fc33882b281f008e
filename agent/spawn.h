// fork/exec with an exact environment, for rsslab_run (one server under a
// profile, from a shell), rsslab_agent (servers over RPC) and the loadgen's
// --local cells. The rest of a launch is beside it: output_pump.h (the
// child's stdout and its ready line), verify_launch.h (the /proc and
// Control check), exit_text.h (how a child ended, its log's tail).
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
#ifndef RSSLAB_AGENT_SPAWN_H_
#define RSSLAB_AGENT_SPAWN_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

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

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_SPAWN_H_
