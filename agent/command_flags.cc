#include "agent/command_flags.h"

#include <vector>

#include "absl/flags/flag.h"
#include "common/flags_parse.h"

// Declared for --help; the values are read from argv (FromFlags).
ABSL_FLAG(std::vector<std::string>, allow_command, {},
          "NAME=/abs/path: a program of the user's (their own service) that may be launched "
          "under a profile by NAME (LaunchRequest.command, or the loadgen's --local --command). "
          "Repeatable. No other path is ever run (docs/AGENT.md).");
ABSL_FLAG(std::vector<std::string>, allow_command_args, {},
          "NAME=TEMPLATE: the arguments of command NAME, words with {port} (required: a port "
          "picked for it), {threads}, {control_port}, {host}, e.g. "
          "\"--port={port} --threads={threads}\". Quoting as in a shell, none run: '...' "
          "literal, \"...\" with \\\" and \\\\, \\ outside quotes (docs/AGENT.md). "
          "Repeatable; the only arguments it ever gets.");
ABSL_FLAG(std::vector<std::string>, allow_command_ready, {},
          "NAME=REGEX: command NAME is ready once a line of its output matches (RE2, anywhere in "
          "the line; ^ anchors; a group (?P<control>HOST:PORT) gives its Control address). "
          "Without it and without --allow_command_ready_port: when {port} accepts a connection.");
ABSL_FLAG(std::vector<std::string>, allow_command_ready_port, {},
          "NAME={port} or NAME={control_port}: command NAME is ready once that port of its "
          "template accepts a connection (after its ready line, if --allow_command_ready is "
          "given too).");

ABSL_FLAG(std::vector<std::string>, allow_command_control, {},
          "NAME=HOST[:PORT],...: besides loopback, where the Control address in command NAME's "
          "ready line (the (?P<control>...) group) may point; a HOST allows any port on it. "
          "Any other address is refused and the program stopped.");

namespace rsslab {
namespace commands {

absl::StatusOr<std::map<std::string, Command>> FromFlags(int argc, char** argv) {
  return Parse(RepeatedFlagValues(argc, argv, "allow_command"),
               RepeatedFlagValues(argc, argv, "allow_command_args"),
               RepeatedFlagValues(argc, argv, "allow_command_ready"),
               RepeatedFlagValues(argc, argv, "allow_command_ready_port"),
               RepeatedFlagValues(argc, argv, "allow_command_control"));
}

bool AnyFlagGiven(int argc, char** argv) {
  for (const char* f : {"allow_command", "allow_command_args", "allow_command_ready",
                        "allow_command_ready_port", "allow_command_control"}) {
    if (!RepeatedFlagValues(argc, argv, f).empty()) return true;
  }
  return false;
}

}  // namespace commands
}  // namespace rsslab
