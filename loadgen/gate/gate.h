// `rsslab_loadgen gate`: the plan of a base-against-head gate, built from
// the command line, and the loadgen command line of each of its runs.
//
//   std::vector<std::string> argv = {"rsslab_loadgen", "gate", "--out=/tmp/g",
//       "--service=/usr/bin/python3 svc.py --port={port}", "--head_env=MALLOC_ARENA_MAX=2",
//       "--scale=0.01"};
//   absl::StatusOr<rsslab::gate::Plan> p = rsslab::gate::PlanFromArgs(argv, flags);
//   // p->passthrough = {"--scale=0.01"}
//   std::vector<std::string> child = rsslab::gate::ChildArgs(*p, rsslab::gate::kHead, 3);
//   // {"--scale=0.01", "--builtin=sweep", "--profiles=glibc", "--threads_list=4", "--local",
//   //  "--repeats=1", "--out=/tmp/g/head/run-03", "--command=service",
//   //  "--allow_command=service=/usr/bin/python3", "--allow_command_args=service=svc.py ..."}
//
// Each run is a fresh `rsslab_loadgen --local` process (the sweep path: the
// service launched under the profile, its scenario, its run directory);
// loadgen/gate/gate_main.h runs them in turn, base then head, and decides
// with compare's verdicts (loadgen/results/compare.h).
#ifndef RSSLAB_LOADGEN_GATE_GATE_H_
#define RSSLAB_LOADGEN_GATE_GATE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace rsslab {
namespace gate {

inline constexpr int kBase = 0;
inline constexpr int kHead = 1;
inline constexpr const char* kSideName[2] = {"base", "head"};
// Bounds on what a user gives.
inline constexpr int kMaxRepeats = 200;
inline constexpr size_t kMaxArgBytes = 4096;
inline constexpr size_t kMaxEnv = 32;

struct Side {
  // The service's command line: an executable (a name looked up in PATH,
  // or a path, relative to `dir`) and its arguments, a template with
  // {port} and {threads} (agent/commands.h quoting). Empty: the lab server.
  std::string command;
  std::string program;   // the executable, absolute
  std::string template_args;
  std::string dir;                 // where its runs start (absolute); "": ours
  std::string rev;                 // a commit to check out into `dir` and build
  std::vector<std::string> env;    // NAME=value, added to its environment
  std::vector<std::string> args;   // loadgen flags for this side only
};

// The gate's own flags as given (gate_main.cc defines them).
struct Flags {
  std::string service, base_command, head_command;
  std::string base_dir, head_dir, base_rev, head_rev, build, repo;
  std::string base_env, head_env, base_args, head_args;
  std::string ready, out, report_md;
  int min_repeats = 5, max_repeats = 20;
  absl::Duration time_budget = absl::Minutes(10);
  absl::Duration build_timeout = absl::Minutes(10);
};

struct Plan {
  Side side[2];
  std::vector<std::string> passthrough;  // loadgen flags both sides get
  std::string ready;                     // --allow_command_ready's regex
  std::string out;                       // absolute
  std::string build, repo;               // --build, --repo (absolute)
  std::string report_md;
  int min_repeats = 5, max_repeats = 20;
  absl::Duration time_budget = absl::Minutes(10);
  absl::Duration build_timeout = absl::Minutes(10);
};

// The gate's own flag names (without "--"), which PlanFromArgs takes out of
// the command line; compare's verdict flags are among them.
bool IsGateFlag(const std::string& name);

// The plan: `argv` is the whole command line (argv[0], "gate", flags);
// every flag that is not the gate's passes through to each run. A usage
// error (InvalidArgument) names the flag: a side given twice or not at
// all, a run flag the gate sets itself (--local, --repeats, --agent...),
// repeats out of 1..200, an argument over 4096 bytes, a command whose
// executable is missing, a directory that is not one.
absl::StatusOr<Plan> PlanFromArgs(const std::vector<std::string>& argv, const Flags& flags);

// The argv (without argv[0]) of `side`'s run number `repeat` (from 1).
std::vector<std::string> ChildArgs(const Plan& plan, int side, int repeat);

// The side's command split into its executable (resolved in its
// directory, or PATH) and its argument template; InvalidArgument naming a
// missing executable. A side without a command (the lab server): nothing.
absl::Status ResolveCommand(Side* side);

// OUT/base/run-01 ...
std::string RunDir(const Plan& plan, int side, int repeat);

// The executable of a command line's first word: a path (relative to
// `dir`, or to the current directory when `dir` is empty) or a name looked
// up in PATH; NotFound naming it when it is not an executable file.
absl::StatusOr<std::string> ResolveProgram(const std::string& word, const std::string& dir);

}  // namespace gate
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_GATE_GATE_H_
