// The loadgen's flags for calling the user's own service: --proto,
// --proto_path, --call, --data, --data_file, --stream_messages,
// --stream_interval, --metadata. Kept apart from the
// main so every subcommand that runs load steps shares them.
//
//   rsslab::v1::LoadSpec flags = ...;            // the command line's load layer
//   rsslab::ApplyCallFlags(&flags);              // --call, --data, --data_file
//   ... BuildPlan(scenario, flags) ...
//   absl::StatusOr<rsslab::CallFlags> calls = rsslab::LoadCallFlags(plan, argv);
//   if (!calls.ok()) { /* usage error (exit 2): nothing was sent */ }
//   runner_options.calls = calls->set.get();
//   runner_options.metadata = calls->metadata;
#ifndef RSSLAB_LOADGEN_CALL_FLAGS_H_
#define RSSLAB_LOADGEN_CALL_FLAGS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "loadgen/plan.h"
#include "loadgen/proto_call.h"
#include "proto/scenario.pb.h"

namespace rsslab {

struct CallFlags {
  std::unique_ptr<ProtoCatalog> catalog;  // null without --proto
  std::unique_ptr<CallSet> set;           // every call the plan's steps make
  std::vector<std::pair<std::string, std::string>> metadata;  // --metadata
  bool any_call = false;                  // some load step names a call
  bool control_given = false;             // --control on the command line
};

// --call / --data / --data_file / --stream_messages / --stream_interval
// into the flags layer of load specs.
void ApplyCallFlags(rsslab::v1::LoadSpec* flags);

// --command=NAME into a sweep (Sweep.command: the user's program, by the
// agent's --allow_command name). INVALID_ARGUMENT for a run that is not a
// sweep, a bad name, or a sweep that also sets handler or server_flags.
absl::Status ApplyCommandFlag(rsslab::v1::Scenario* scenario);

// Loads --proto, compiles every load step's call (the steps of a repeat
// too) and checks every --metadata in `argv` (the command line: the flag
// is repeatable). INVALID_ARGUMENT naming the file, the method or the
// field: a usage error, found before any request is sent.
absl::StatusOr<CallFlags> LoadCallFlags(const Plan& plan, const std::vector<std::string>& argv);

// --metadata=key:value, checked: keys as HTTP/2 and gRPC want them
// (lower-case letters, digits, "-_."; no ':' pseudo-headers, no "grpc-...",
// none of te, host, content-type, content-length, user-agent and HTTP/2's
// connection-specific names); values printable ASCII, except that a key
// ending in "-bin" takes base64, sent as the bytes it decodes to. One line
// naming the entry and the rule.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMetadata(
    const std::vector<std::string>& items);

// The Control address to use: --control, except that a run calling the
// user's own methods (`calls.any_call`: --call, or a step's call) has none
// unless --control was given on the command line (`calls.control_given`),
// even as rsslab_server's default 127.0.0.1:50052: that default is not the
// user's service's, but an explicit one is the operator's word.
std::string EffectiveControl(const std::string& control_flag, const CallFlags& calls);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_CALL_FLAGS_H_
