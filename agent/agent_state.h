// rsslab_agent's state file: the servers it launched, written atomically
// after every change, so that an agent restarted after a crash (SIGKILL, a
// bug) can adopt the servers that outlived it instead of leaving them
// orphaned and unknown. Also the /proc checks that tell whether a recorded
// pid is still that very server (start time against pid reuse, and the
// executable).
//
//   absl::StatusOr<v1::AgentState> st = agent_state::Read(dir + "/servers.json");
//   for (const auto& rec : st->servers()) {
//     std::string why = agent_state::WhyNotAlive(rec, "/opt/rsslab/bin/rsslab_server");
//     if (why.empty()) { /* adopt */ } else { /* lost: why */ }
//   }
//   agent_state::Write(dir + "/servers.json", state);   // tmp + fsync + rename
#ifndef RSSLAB_AGENT_AGENT_STATE_H_
#define RSSLAB_AGENT_AGENT_STATE_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/agent.pb.h"

namespace rsslab {
namespace agent_state {

// The file inside --state_dir.
inline constexpr const char* kStateFile = "servers.json";

struct ProcStat {
  char state = '?';          // field 3: R, S, D, Z, ...
  uint64_t start_ticks = 0;  // field 22: start time in clock ticks after boot
};
// Parses the text of /proc/PID/stat (the command name may hold spaces and
// parentheses: fields are counted after the last ')').
absl::StatusOr<ProcStat> ParseProcStat(absl::string_view text);
// NOT_FOUND when no such process.
absl::StatusOr<ProcStat> ReadProcStat(pid_t pid);
// readlink(/proc/PID/exe), "" if unreadable.
std::string ExePath(pid_t pid);

// "" when the recorded server still runs: same pid, same start time, not a
// zombie, executable `server_binary` (or that path with " (deleted)", a
// binary replaced by a rebuild). Otherwise why not, in words.
std::string WhyNotAlive(const rsslab::v1::AgentStateServer& rec,
                        const std::string& server_binary);

// Reads and checks a state file. NOT_FOUND when there is none (a first
// start); INVALID_ARGUMENT naming the file and the problem when it does not
// parse or holds an impossible record.
absl::StatusOr<rsslab::v1::AgentState> Read(const std::string& path);
// PATH.tmp, fsync, rename over PATH: a crash leaves the old or the new file,
// never half of one.
absl::Status Write(const std::string& path, const rsslab::v1::AgentState& state);

// Creates `dir` (0700) if needed and refuses one that is not ours or that
// others may write to: whoever can write the state file chooses which pids
// the agent signals.
absl::Status PrepareDir(const std::string& dir);

// An exclusive flock on DIR/agent.lock, held for the agent's life (close on
// exec, so servers never inherit it). FAILED_PRECONDITION naming the holder
// when another agent has it.
absl::StatusOr<int> LockDir(const std::string& dir);

}  // namespace agent_state
}  // namespace rsslab

#endif  // RSSLAB_AGENT_AGENT_STATE_H_
