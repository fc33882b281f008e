#include "loadgen/call_flags.h"

#include <limits>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"
#include "common/flags_parse.h"

ABSL_FLAG(std::vector<std::string>, proto, {},
          "The user's service: its .proto file(s), comma-separated, parsed at run time (no "
          "codegen); with --call.");
ABSL_FLAG(std::vector<std::string>, proto_path, {},
          "Directories the --proto files and their imports are found in, comma-separated "
          "(default: each --proto file's directory; /usr/include is searched last for "
          "google/protobuf/*.proto).");
ABSL_FLAG(std::string, call, "",
          "Call this unary method of the user's service instead of rsslab.v1.Load/Handle: "
          "package.Service/Method, from the --proto files. A scenario's load steps may name "
          "their own (LoadSpec.call).");
ABSL_FLAG(std::string, data, "",
          "With --call: the request as JSON (protobuf's JSON mapping), a template: {{seq}}, "
          "{{rand_int MIN MAX}}, {{rand_str N}} in any value (docs/LOADGEN.md).");
ABSL_FLAG(std::string, data_file, "",
          "With --call, instead of --data: a file of JSON templates, one per line, used in turn.");
ABSL_FLAG(uint32_t, stream_messages, 0,
          "With a client- or bidi-streaming --call: request messages per stream (default 10; "
          "a server-streaming call sends one). Message k uses --data_file line k in turn and "
          "{{msg}} = k.");
ABSL_FLAG(absl::Duration, stream_interval, absl::ZeroDuration(),
          "With a streaming --call: pause between two request messages of a stream, e.g. 10ms.");
ABSL_FLAG(std::string, command, "",
          "Sweeps: launch the user's program the agent allows under this name "
          "(rsslab_agent --allow_command=NAME=PATH) in every cell instead of rsslab_server.");
ABSL_FLAG(std::string, metadata, "",
          "key:value sent with every RPC (auth, routing). Repeatable: every occurrence counts.");

namespace rsslab {
namespace {

void CollectLoads(const std::vector<PlanStep>& steps, std::vector<const rsslab::v1::LoadSpec*>* out) {
  for (const PlanStep& s : steps) {
    if (s.kind == PlanStep::Kind::kLoad) out->push_back(&s.load);
    if (s.kind == PlanStep::Kind::kRepeat) CollectLoads(s.steps, out);
  }
}

}  // namespace

void ApplyCallFlags(rsslab::v1::LoadSpec* flags) {
  flags->set_call(absl::GetFlag(FLAGS_call));
  flags->set_data(absl::GetFlag(FLAGS_data));
  flags->set_data_file(absl::GetFlag(FLAGS_data_file));
  flags->set_stream_messages(absl::GetFlag(FLAGS_stream_messages));
  // Negative or infinite: kept as such, for the bounds check to name.
  const absl::Duration interval = absl::GetFlag(FLAGS_stream_interval);
  flags->set_stream_interval_ms(interval == absl::InfiniteDuration()
                                    ? std::numeric_limits<double>::infinity()
                                    : absl::ToDoubleMilliseconds(interval));
}

absl::Status ApplyCommandFlag(rsslab::v1::Scenario* scenario) {
  const std::string cmd = absl::GetFlag(FLAGS_command);
  if (cmd.empty()) return absl::OkStatus();
  if (!scenario->has_sweep()) {
    return absl::InvalidArgumentError(
        "--command names the program a sweep's cells launch; use --builtin=sweep or a scenario "
        "with a sweep block (a single run drives --target)");
  }
  if (cmd.size() > 64 || cmd.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                               "0123456789_.-") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--command=", cmd.substr(0, 64), ": a name the agent was given (--allow_command=NAME=PATH)"));
  }
  auto* sw = scenario->mutable_sweep();
  if (!sw->handler().empty() || !sw->server_flags().empty()) {
    return absl::InvalidArgumentError(
        "--command: the sweep sets a handler or server_flags, which only rsslab_server takes");
  }
  sw->set_command(cmd);
  return absl::OkStatus();
}

namespace {

// Names HTTP/2 forbids in a request (connection-specific, RFC 9113 8.2.2) or
// gRPC sets itself (its PROTOCOL-HTTP2 spec); sending them breaks the call
// or is silently replaced.
constexpr absl::string_view kReservedKeys[] = {
    "te",         "host",      "content-type",     "content-length",    "user-agent",
    "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"};

// One key as gRPC's wire spec allows it: 0-9 a-z _ - . only (HTTP/2's token
// characters, lower-case, minus those gRPC does not carry).
absl::Status CheckMetadataKey(absl::string_view key, const std::string& shown) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--metadata=", shown, ": ", why));
  };
  if (key[0] == ':') return bad("keys starting with ':' are HTTP/2 pseudo-headers, set by gRPC");
  for (char c : key) {
    if (absl::ascii_isupper(c)) {
      return bad(absl::StrCat("HTTP/2 header names are lower-case (", Echo(absl::AsciiStrToLower(key), 100),
                              ")"));
    }
    if (!absl::ascii_isdigit(c) && !absl::ascii_islower(c) && c != '-' && c != '_' && c != '.') {
      return bad("keys are lower-case letters, digits, '-', '_' and '.'");
    }
  }
  if (absl::StartsWith(key, "grpc-")) return bad("grpc-* keys are reserved by gRPC");
  for (absl::string_view r : kReservedKeys) {
    if (key == r) return bad(absl::StrCat("'", r, "' is reserved by HTTP/2 or set by gRPC"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseMetadata(
    const std::vector<std::string>& items) {
  std::vector<std::pair<std::string, std::string>> out;
  if (items.size() > 64) return absl::InvalidArgumentError("--metadata: more than 64 entries");
  for (const std::string& item : items) {
    const size_t colon = item.find(':', 1);  // a leading ':' is the key's, and refused
    const std::string shown = Echo(item, 100);
    if (colon == std::string::npos || item.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--metadata=", shown, ": want key:value"));
    }
    const std::string key = item.substr(0, colon);
    std::string value(absl::StripLeadingAsciiWhitespace(item.substr(colon + 1)));
    if (key.size() > 128 || value.size() > 8192) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metadata=", shown, ": key over 128 or value over 8192 characters"));
    }
    if (absl::Status s = CheckMetadataKey(key, shown); !s.ok()) return s;
    if (absl::EndsWith(key, "-bin")) {
      // Binary, given in base64 as grpcurl takes it; gRPC encodes it again.
      std::string bytes;
      if (!absl::Base64Unescape(value, &bytes)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--metadata=", shown, ": a -bin key's value is binary, given in base64"));
      }
      value = std::move(bytes);
    } else {
      for (char c : value) {
        if (!absl::ascii_isprint(c)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "--metadata=", shown, ": values are printable ASCII (binary: a key ending in -bin)"));
        }
      }
    }
    out.emplace_back(key, std::move(value));
  }
  return out;
}

absl::StatusOr<CallFlags> LoadCallFlags(const Plan& plan, const std::vector<std::string>& argv) {
  CallFlags c;
  // Each occurrence whole (a value may hold commas); absl keeps only the last.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> md = ParseMetadata(
      RepeatedFlagValues(static_cast<int>(args.size()), args.data(), "metadata"));
  if (!md.ok()) return md.status();
  c.metadata = *std::move(md);
  // Given: on the command line (even as its default value), or changed from
  // its default some other way (--flagfile).
  const absl::CommandLineFlag* control = absl::FindCommandLineFlag("control");
  c.control_given =
      !RepeatedFlagValues(static_cast<int>(args.size()), args.data(), "control").empty() ||
      (control != nullptr && control->CurrentValue() != control->DefaultValue());
  const std::vector<std::string> protos = absl::GetFlag(FLAGS_proto);
  if (!protos.empty()) {
    absl::StatusOr<std::unique_ptr<ProtoCatalog>> cat =
        ProtoCatalog::Load(protos, absl::GetFlag(FLAGS_proto_path));
    if (!cat.ok()) return cat.status();
    c.catalog = *std::move(cat);
  } else if (!absl::GetFlag(FLAGS_proto_path).empty()) {
    return absl::InvalidArgumentError("--proto_path without --proto");
  }
  c.set = std::make_unique<CallSet>(c.catalog.get());
  std::vector<const rsslab::v1::LoadSpec*> loads;
  CollectLoads(plan.steps, &loads);
  for (const rsslab::v1::LoadSpec* l : loads) {
    if (absl::Status s = c.set->Add(*l); !s.ok()) return s;
    if (!l->call().empty()) c.any_call = true;
  }
  if (c.catalog != nullptr && !c.any_call) {
    return absl::InvalidArgumentError(
        "--proto without --call: name the method to call (package.Service/Method)");
  }
  return c;
}

std::string EffectiveControl(const std::string& control_flag, const CallFlags& calls) {
  return !calls.any_call || calls.control_given ? control_flag : "";
}

}  // namespace rsslab
