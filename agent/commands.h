// The user's own programs an agent (or the loadgen's --local) may launch
// under profiles (--allow_command): a name the operator gives a path, an
// argument template only the operator sets, and how to tell the program is
// ready.
//
//   auto cmds = rsslab::commands::Parse(
//       {"shop=/srv/shop/service.py"},                         // --allow_command
//       {"shop=--threads={threads} --port={port}"},            // --allow_command_args
//       {"shop=^shop ready "},                                 // --allow_command_ready (RE2)
//       {});                                                   // --allow_command_ready_port
//   const rsslab::commands::Command& c = cmds->at("shop");
//   rsslab::launch::LaunchOptions lo;
//   rsslab::commands::Values v;
//   if (absl::Status s = rsslab::commands::Configure(c, "127.0.0.1", 4, &lo, &v); !s.ok()) ...
//   // lo.program = "/srv/shop/service.py", lo.fixed_args = {"--threads=4", "--port=41234"}
//   lo.profile = ...; lo.log_path = ...;
//   auto started = rsslab::launch::StartVerifiedServer(lo);
//   std::string data, control;
//   rsslab::commands::Addresses(c, v, started->ready_line, &data, &control);
//
// Security model (as for the server): a LaunchRequest names a command; it
// never carries a path, an argument or an environment variable. The agent
// runs only the paths it was started with, each with the arguments the
// operator's template makes from the agent's own numbers. The loadgen's
// --local takes the same flags and applies the same rules (Parse,
// Configure), so a batch task runs the same programs an agent would.
#ifndef RSSLAB_AGENT_COMMANDS_H_
#define RSSLAB_AGENT_COMMANDS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/launch.h"
#include "agent/readiness.h"
#include "common/listen.h"

namespace rsslab {
namespace commands {

// One word of an argument template, in pieces: text from single quotes is
// literal (kept as is, braces included); unquoted and double-quoted text
// has its {placeholders} replaced.
struct TemplateWord {
  struct Part {
    std::string text;
    bool expand = true;
  };
  std::vector<Part> parts;
};

// The template's one quoting rule (docs/AGENT.md, "Quoting"), shell-like
// words with no shell ever run:
//   - words are separated by unquoted spaces and tabs;
//   - '...' is literal up to the next ' (no escapes, no placeholders);
//   - "..." keeps everything but \" and \\, which give " and \;
//   - outside quotes, \ makes the next character literal;
//   - quoted and unquoted pieces next to each other make one word
//     (--q='a b' is the one word --q=a b; '' is an empty word);
//   - ; | & $ ` * ? < > ( ) ~ # and every other character are literal.
// INVALID_ARGUMENT naming the problem and its position: an unterminated
// quote, a trailing backslash, a control character (newline included).
absl::StatusOr<std::vector<TemplateWord>> SplitTemplate(absl::string_view text);

// The words written back in the template's quoting, so that SplitTemplate
// gives them again: plain words as they are, others in single quotes (a '
// inside as '\''); for logs that show exactly what was run.
std::string JoinQuoted(const std::vector<std::string>& words);

struct Command {
  std::string name;
  std::string path;  // absolute, resolved when the agent starts
  // Words (SplitTemplate); each may hold {threads}, {port}, {control_port},
  // {host} outside single quotes.
  std::vector<TemplateWord> args;
  // --allow_command_ready: the program is ready once a line of its output
  // matches (empty: no line is awaited). A named group (?P<control>...)
  // gives its Control address.
  launch::LineMatch ready_line;
  // --allow_command_ready_port: then (or instead) this port of its
  // template must accept a connection ({port} or {control_port}). Without
  // either flag: {port}.
  enum class ReadyPort { kNone, kPort, kControlPort };
  ReadyPort ready_port = ReadyPort::kNone;
  bool uses_port = false;
  bool uses_control_port = false;
  // --allow_command_control=NAME=HOST[:PORT],...: where a ready line's
  // `control` group may point besides loopback (a HOST allows any port on
  // it). Anything else is refused and the program stopped.
  std::vector<HostPort> control_allowed;
};

// --allow_command=NAME=PATH (each), --allow_command_args=NAME=TEMPLATE,
// --allow_command_ready=NAME=REGEX, --allow_command_ready_port=NAME={port}
// or NAME={control_port}, --allow_command_control=NAME=HOST[:PORT],...
// INVALID_ARGUMENT naming the flag: a name that is not [A-Za-z0-9_.-]+, a
// path that is not an executable file, a value for an unknown name, a
// template that does not split (SplitTemplate) or has an unknown
// {placeholder} or no {port}, a regex RE2 refuses, a ready port the
// template does not pass, a control address that is not HOST or HOST:PORT.
absl::StatusOr<std::map<std::string, Command>> Parse(const std::vector<std::string>& allow,
                                                     const std::vector<std::string>& args,
                                                     const std::vector<std::string>& ready,
                                                     const std::vector<std::string>& ready_port,
                                                     const std::vector<std::string>& control = {});

// The command `name` from `allowed`; NOT_FOUND listing the names `who`
// ("this agent", "this loadgen") was started with otherwise.
absl::StatusOr<const Command*> Lookup(const std::map<std::string, Command>& allowed,
                                      absl::string_view name, absl::string_view who);

struct Values {
  int threads = 0;
  int port = 0;
  int control_port = 0;
  std::string host = "127.0.0.1";
};
std::vector<std::string> Expand(const Command& c, const Values& v);

// A launch of `c` on `host` with `threads`: its program, the arguments
// its template makes with ports picked now, how it shows it is ready, no
// flag check (its arguments are its own) and /proc-only verification (it
// has no rsslab Control service to ask). *values: the numbers used.
absl::Status Configure(const Command& c, const std::string& host, int threads,
                       launch::LaunchOptions* lo, Values* values);

// Once it is ready: where it serves (host:{port}) and its Control address
// ({control_port}, or the ready line's `control` group; "" for none).
// INVALID_ARGUMENT for a `control` group that is not HOST:PORT, or whose
// host is neither loopback nor one of c.control_allowed: the program's own
// word is never dialled unchecked.
absl::Status Addresses(const Command& c, const Values& v, const std::string& ready_line,
                       std::string* data, std::string* control);

// Addresses() for a started launch; on an error the program is stopped
// (SIGTERM, SIGKILL after 5 s) and the one-line error says so.
absl::Status AddressesOrStop(const Command& c, const Values& v, launch::Started& started,
                             std::string* data, std::string* control);

// A port on `host` the kernel says is free now (bound to port 0, then
// closed: another process could take it before the program does, which
// then fails to start and says so in its log).
absl::StatusOr<int> PickFreePort(const std::string& host);


}  // namespace commands
}  // namespace rsslab

#endif  // RSSLAB_AGENT_COMMANDS_H_
