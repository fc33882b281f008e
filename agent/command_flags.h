// The --allow_command flags, shared by rsslab_agent and rsslab_loadgen's
// --local (the same allowlist and the same rules on every path that
// launches a user's program): --allow_command=NAME=PATH,
// --allow_command_args=NAME=TEMPLATE, --allow_command_ready=NAME=REGEX,
// --allow_command_ready_port=NAME={port}|{control_port},
// --allow_command_control=NAME=HOST[:PORT],... Each is
// repeatable and each occurrence is read whole from argv (a template has
// spaces and may have commas).
//
//   absl::StatusOr<std::map<std::string, rsslab::commands::Command>> cmds =
//       rsslab::commands::FromFlags(argc, argv);
//   if (!cmds.ok()) { fprintf(stderr, "%s\n", ...); exit(2); }
#ifndef RSSLAB_AGENT_COMMAND_FLAGS_H_
#define RSSLAB_AGENT_COMMAND_FLAGS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "agent/commands.h"

namespace rsslab {
namespace commands {

// Parse() of the five flags as given on the command line.
absl::StatusOr<std::map<std::string, Command>> FromFlags(int argc, char** argv);

// True if any of the five flags was given.
bool AnyFlagGiven(int argc, char** argv);

}  // namespace commands
}  // namespace rsslab

#endif  // RSSLAB_AGENT_COMMAND_FLAGS_H_
