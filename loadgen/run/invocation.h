// `rsslab_loadgen [run]`'s command line, checked: the scenario and the load
// flags resolved into a plan, the calls, credentials, the run directory and
// a sweep's cells, agents and CPUs. Every problem is a usage error (exit 2)
// found before a port, a file or a connection is opened.
//
//   absl::StatusOr<rsslab::run::Invocation> inv = rsslab::run::ParseInvocation(args);
//   if (!inv.ok()) return rsslab::cli::Fail(rsslab::cli::kExitUsage, inv.status().message());
#ifndef RSSLAB_LOADGEN_RUN_INVOCATION_H_
#define RSSLAB_LOADGEN_RUN_INVOCATION_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/command_flags.h"
#include "common/auth.h"
#include "common/host_info.h"
#include "control/registry.h"
#include "loadgen/call_flags.h"
#include "loadgen/http/http_target.h"
#include "loadgen/plan.h"
#include "loadgen/progress_line.h"
#include "proto/scenario.pb.h"

namespace rsslab {
namespace run {

struct Invocation {
  std::vector<std::string> argv;
  rsslab::v1::LoadSpec flags;    // the command line's load layer
  rsslab::v1::Scenario scenario;  // after --duration (soak) and sweep overrides
  rsslab::Plan plan;              // its steps, resolved once
  rsslab::ProgressMode progress = rsslab::ProgressMode::kLines;
  rsslab::Security security;      // credentials, read
  // --as_user: whose registry entries --control=all:NAME / pid:PID believes.
  rsslab::registry::Trust control_trust = rsslab::registry::Trust::Self();
  bool resume = false;
  bool in_place = false;          // --results_dir: resumed in place when it exists
  std::string out;                // the run directory
  std::string metrics_address;    // --metrics_listen, "" when off
  // Sweeps.
  std::string matrix_id;          // cells.h MatrixId
  int cells_total = 0;
  std::vector<int> cells;         // --cells; empty: all
  std::vector<std::string> agents;  // --agent / --agents_file
  std::vector<int> ok_exit_codes;   // --ok_exit_codes
  bool local = false;             // --local
  rsslab::CpuSplit cpus;          // --local: server / loadgen CPUs
  // --local: --allow_command and its templates (agent/command_flags.h).
  std::map<std::string, rsslab::commands::Command> commands;
  rsslab::CallFlags calls;        // --proto / --call: compiled, checked
  // --target=http://...: the HTTP server and its requests; null for gRPC.
  std::shared_ptr<const rsslab::http::Target> http;
};

// The whole command line (argv[0] included), after absl's flag parsing.
absl::StatusOr<Invocation> ParseInvocation(std::vector<std::string> argv);

// Who ran a sweep's cells, as its header records it and --resume checks:
// "local" for --local, else the agents joined by commas.
std::string RecordedAgent(const Invocation& inv);

}  // namespace run
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_INVOCATION_H_
