// The user's own programs an agent may launch under profiles
// (--allow_command): a name the operator gives a path, an argument template
// only the operator sets, and how to tell the program is ready.
//
//   auto cmds = rsslab::commands::Parse(
//       {"shop=/srv/shop/service.py"},                         // --allow_command
//       {"shop=--threads={threads} --port={port}"},            // --allow_command_args
//       {});                                                   // --allow_command_ready
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
#include <regex>
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
  // A line of the program's output matching this means ready; empty: ready
  // once {port} accepts a TCP connection.
  std::string ready_regex;
  std::shared_ptr<const std::regex> ready;  // compiled ready_regex
  bool uses_port = false;
  bool uses_control_port = false;
};

// --allow_command=NAME=PATH (each), --allow_command_args=NAME=TEMPLATE,
// --allow_command_ready=NAME=REGEX. INVALID_ARGUMENT naming the flag: a
// name that is not [A-Za-z0-9_.-]+, a path that is not an executable file,
// a template or regex for an unknown name, a template with an unknown
// {placeholder}, or neither {port} nor a ready regex (no way to know it is
// ready).
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

// Whether HOST:PORT accepts a TCP connection now.
bool PortAccepts(const std::string& host, int port);

// Looks for a line matching `re` in the log at `path` from *offset (as the
// agent's FindReadyLine does for the server's ready line).
bool FindMatchingLine(const std::string& path, const std::regex& re, off_t* offset,
                      std::string* line);

}  // namespace commands
}  // namespace rsslab

#endif  // RSSLAB_AGENT_COMMANDS_H_
