// The user's own programs an agent may launch under profiles
// (--allow_command): a name the operator gives a path, an argument template
// only the operator sets, and how to tell the program is ready.
//
//   auto cmds = rsslab::commands::Parse(
//       {"shop=/srv/shop/service.py"},                         // --allow_command
//       {"shop=--threads={threads} --port={port}"},            // --allow_command_args
//       {"shop=shop ready "});                                 // --allow_command_ready
//   const rsslab::commands::Command& c = cmds->at("shop");
//   auto args = rsslab::commands::Expand(c, {.threads = 4, .port = 41234});
//   // {"--threads=4", "--port=41234"}
//
// Security model (as for the server): a LaunchRequest names a command; it
// never carries a path, an argument or an environment variable. The agent
// runs only the paths it was started with, each with the arguments the
// operator's template makes from the agent's own numbers.
#ifndef RSSLAB_AGENT_COMMANDS_H_
#define RSSLAB_AGENT_COMMANDS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace commands {

struct Command {
  std::string name;
  std::string path;  // absolute, resolved when the agent starts
  // Words; each may hold {threads}, {port}, {control_port}, {host}.
  std::vector<std::string> args;
  // The program is ready when a line of its output starts with this (the
  // agent's one launch path, agent/launch.h, waits for a ready line).
  std::string ready_prefix;
  bool uses_port = false;
  bool uses_control_port = false;
};

// --allow_command=NAME=PATH (each), --allow_command_args=NAME=TEMPLATE,
// --allow_command_ready=NAME=PREFIX. INVALID_ARGUMENT naming the flag: a
// name that is not [A-Za-z0-9_.-]+, a path that is not an executable file,
// a template or prefix for an unknown name, a template with an unknown
// {placeholder} or without {port}, or no ready prefix.
absl::StatusOr<std::map<std::string, Command>> Parse(const std::vector<std::string>& allow,
                                                     const std::vector<std::string>& args,
                                                     const std::vector<std::string>& ready);

struct Values {
  int threads = 0;
  int port = 0;
  int control_port = 0;
  std::string host = "127.0.0.1";
};
std::vector<std::string> Expand(const Command& c, const Values& v);

// A port on `host` the kernel says is free now (bound to port 0, then
// closed: another process could take it before the program does, which
// then fails to start and says so in its log).
absl::StatusOr<int> PickFreePort(const std::string& host);


}  // namespace commands
}  // namespace rsslab

#endif  // RSSLAB_AGENT_COMMANDS_H_
