// Where a sweep cell's server runs: through an rsslab_agent (AgentHost), or
// launched by the loadgen itself on this machine (LocalHost, the command a
// batch task or a pod runs). Both start the server through the one launch
// path (agent/launch.h StartVerifiedServer): the agent's flag allowlist, the
// ready line, VerifyLaunch (the library mapped, the environment, the
// allocator the server reports).
//
//   std::unique_ptr<rsslab::CellHost> host = rsslab::MakeAgentHost(o);   // or MakeLocalHost
//   if (absl::Status s = host->Prepare(scenario.sweep()); !s.ok()) ...  // before any cell
//   bool lost = false;
//   absl::StatusOr<rsslab::v1::ServerProcess> server = host->Launch(cell, scenario, &lost);
//   ... drive server->data_address() ...
//   absl::StatusOr<rsslab::v1::ServerProcess> ended = host->Stop(*server, 5000, &lost);
//
// `lost` says the host itself went away (the agent became unreachable): its
// cells belong on another host. A host is used by one thread at a time.
#ifndef RSSLAB_LOADGEN_SWEEP_CELL_HOST_H_
#define RSSLAB_LOADGEN_SWEEP_CELL_HOST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/commands.h"
#include "common/auth.h"
#include "common/host_info.h"
#include "loadgen/results/cells.h"
#include "loadgen/status_code.h"
#include "proto/agent.pb.h"
#include "proto/profile.pb.h"
#include "proto/results.pb.h"
#include "proto/scenario.pb.h"

namespace rsslab {

class CellHost {
 public:
  virtual ~CellHost() = default;
  // The agent's address, or "local".
  virtual const std::string& name() const = 0;
  // Before the first cell: the host answers and knows every profile of the
  // matrix. UNAVAILABLE (unreachable) or NOT_FOUND (a profile), naming it.
  virtual absl::Status Prepare(const rsslab::v1::Sweep& sweep) = 0;
  // A verified server for the cell. An error's message carries the exit
  // status and log tail of a server that did not start.
  virtual absl::StatusOr<rsslab::v1::ServerProcess> Launch(const SweepCell& cell,
                                                           const rsslab::v1::Scenario& scenario,
                                                           bool* host_lost) = 0;
  // SIGTERM, SIGKILL after grace_ms; how the server exited.
  virtual absl::StatusOr<rsslab::v1::ServerProcess> Stop(const rsslab::v1::ServerProcess& server,
                                                         int grace_ms, bool* host_lost) = 0;
  // Where cells run (the CellResult's host field).
  virtual rsslab::v1::HostInfo Where() const = 0;
  // The launched process's memory read from outside (/proc/PID), for a
  // program without a Control service (Sweep.command).
  virtual absl::StatusOr<rsslab::v1::Snapshot> OutsideSnapshot(
      const rsslab::v1::ServerProcess& server) = 0;
};

struct AgentHostOptions {
  std::string address;  // HOST:PORT
  const Security* security = nullptr;  // not owned; null: plaintext
  int max_receive_mb = kDefaultMaxReceiveMb;  // --max_receive_mb: the agent's replies too
  absl::Duration connect_timeout = absl::Seconds(10);
  absl::Duration launch_timeout = absl::Seconds(120);
};
std::unique_ptr<CellHost> MakeAgentHost(const AgentHostOptions& options);

struct LocalHostOptions {
  std::string server_binary;  // may be empty when every cell runs a command
  // --allow_command and its templates: the user's programs a sweep's
  // --command may name (agent/commands.h, the agent's rules).
  std::map<std::string, commands::Command> commands;
  rsslab::v1::ProfileSet profiles;
  // Directories holding NAME.py handlers; the first match wins.
  std::vector<std::string> handler_dirs;
  // Each server's stdout and stderr: LOG_DIR/<cell>.log, capped at
  // log_max_bytes (0: not capped; else at least launch::kMinLogCapBytes)
  // by a log writer process, `log_writer_binary` run again (agent/log_cap.h).
  std::string log_dir;
  int64_t log_max_bytes = 0;
  std::string log_writer_binary;
  std::vector<int> server_cpus;   // empty: not pinned
  std::vector<int> loadgen_cpus;  // recorded only (the caller pins itself)
  absl::Duration ready_timeout = absl::Seconds(60);
};
std::unique_ptr<CellHost> MakeLocalHost(LocalHostOptions options);

// The record of where something ran (pinning fields empty).
rsslab::v1::HostInfo HostInfoOf(const HostFacts& facts);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_CELL_HOST_H_
