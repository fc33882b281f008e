// Every rsslab_server flag, its range (or choices) and who may set it: the
// one table the server's own checks, the agent's allowlist, rsslab_run and
// the loadgen's --local read, so a value is refused (or accepted) the same
// way wherever it comes from.
//
//   absl::Status s = CheckServerFlag("cache_limit_mb", "200", FlagSource::kRequest);
//   const ServerFlagRule* r = FindServerFlag("threads");   // r->min, r->max
//   std::string help = ServerFlagsHelp(FlagSource::kRequest);
//
// Two sources: a request (an agent's LaunchRequest, a scenario's
// sweep.server_flags, run locally or through an agent alike) may set only
// what changes the experiment, never a path, an address or a credential;
// the operator (rsslab_run's own command line on this machine) may set
// every flag, still range-checked.
#ifndef RSSLAB_COMMON_SERVER_FLAGS_H_
#define RSSLAB_COMMON_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

enum class FlagSource {
  kRequest,   // LaunchRequest.server_flags, Sweep.server_flags
  kOperator,  // the command line of rsslab_run
};

struct ServerFlagRule {
  enum Kind {
    kInt,     // an integer in [min, max]
    kDouble,  // a finite number in [min, max]
    kChoice,  // one of `choices` (comma-separated)
    kParams,  // handler params, k=v,k=v ([A-Za-z0-9_] keys, printable values)
    kBool,    // true/false (or --name / --noname)
    kText,    // a path or an address: at most 4096 printable characters
  };
  const char* name;
  Kind kind;
  int64_t min = 0;
  int64_t max = 0;
  const char* choices = "";
  // The least trusted source that may set it.
  FlagSource settable_by = FlagSource::kOperator;
};

// Every flag of rsslab_server (common/auth.h's credential flags included).
const std::vector<ServerFlagRule>& ServerFlagRules();
// nullptr for a name the server does not have.
const ServerFlagRule* FindServerFlag(absl::string_view name);
// The rule of a flag the server has, for its own range checks
// (server/run_server.cc); aborts on a name not in the table, a
// programming error every test that starts a server catches.
const ServerFlagRule& ServerFlag(absl::string_view name);

// The flag exists, `source` may set it, and the value is in its range.
// INVALID_ARGUMENT naming the flag and what is allowed otherwise.
absl::Status CheckServerFlag(absl::string_view name, absl::string_view value, FlagSource source);

// Command-line arguments ("--name=value", "--name value", "--name" and
// "--noname" for booleans) split into (name, value) pairs, each checked
// with CheckServerFlag.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseServerArgs(
    const std::vector<std::string>& args, FlagSource source);

// "cache_limit_mb, max_cache_limit_mb, ...": the names `source` may set.
std::string ServerFlagNames(FlagSource source);
// The same with each one's range: "cache_limit_mb (0..1073741824), ...".
std::string ServerFlagsHelp(FlagSource source);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_SERVER_FLAGS_H_
