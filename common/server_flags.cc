#include "common/server_flags.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_split.h"
#include "common/untrusted_text.h"
#include "common/handler_params.h"
#include "common/units.h"
#include "common/auto_trim_table.h"

namespace rsslab {
namespace {

using R = ServerFlagRule;
constexpr FlagSource kReq = FlagSource::kRequest;
constexpr FlagSource kOp = FlagSource::kOperator;
constexpr int64_t kHour_ms = 3600000;

ServerFlagRule AutoTrimModeRule() {
  static const std::string* choices = new std::string(AutoTrimModeNames(","));
  return {"auto_trim", R::kChoice, 0, 0, choices->c_str()};
}

// A knob's range in the flag's unit; kDouble in millionths.
ServerFlagRule AutoTrimRule(const AutoTrimKnob& k) {
  const double scale = k.flag_integer ? k.flag_scale : 1e6;
  return {k.flag, k.flag_integer ? R::kInt : R::kDouble, std::llround(k.lo * scale),
          std::llround(k.hi * scale)};
}

// The ranges are the server's own (server/run_server.cc reads them
// from here); what a request may set is what the agent has always allowed.
// kDouble ranges are in millionths (settle_fraction: [0, 0.99]).
const std::vector<ServerFlagRule>& Table() {
  static const auto* rules = [] {
    auto* r = new std::vector<ServerFlagRule>{
      {"listen", R::kText},
      {"control_listen", R::kText},
      {"metrics_listen", R::kText},
      {"threads", R::kInt, 1, 4096},
      {"handler", R::kText},
      {"handler_params", R::kParams, 0, 0, "", kReq},
      {"cache_limit_mb", R::kInt, 0, kMaxMiB, "", kReq},
      {"max_cache_limit_mb", R::kInt, 0, kMaxMiB, "", kReq},
      {"thread_mode", R::kChoice, 0, 0, "fixed,churn", kReq},
      {"churn_every", R::kInt, 1, 1 << 30, "", kReq},
      {"churn_overlap_ms", R::kInt, 0, kHour_ms, "", kReq},
      {"stuck_after_ms", R::kInt, 1, 24 * kHour_ms, "", kReq},
      {"max_message_mb", R::kInt, 1, 1024},
      {"max_watch_streams", R::kInt, 0, 1024, "", kReq},
      {"shutdown_grace_ms", R::kInt, 0, kHour_ms, "", kReq},
      {"handler_budget_ms", R::kInt, 0, kHour_ms, "", kReq},
    };
    // The --auto_trim* rows come from common/auto_trim_table.h.
    r->push_back(AutoTrimModeRule());
    for (const AutoTrimKnob& k : AutoTrimKnobs()) {
      if (*k.flag != '\0') r->push_back(AutoTrimRule(k));
    }
    r->insert(r->end(), {
      {"trim_thread_stats", R::kBool},
      {"tls_cert", R::kText},
      {"tls_key", R::kText},
      {"tls_ca", R::kText},
      {"tls_server_name", R::kText},
      {"auth_token_file", R::kText},
      {"insecure_listen", R::kBool},
    });
    return r;
  }();
  return *rules;
}

bool MaySet(const ServerFlagRule& r, FlagSource source) {
  return source == kOp || r.settable_by == kReq;
}

absl::Status CheckParams(absl::string_view v, const std::function<absl::Status(absl::string_view)>& bad) {
  if (v.size() > 4096) return bad("longer than 4096 characters");
  absl::StatusOr<std::map<std::string, std::string>> params = ParseHandlerParams(v);
  if (!params.ok()) return bad("want key=value,key=value");
  for (const auto& [key, value] : *params) {
    for (char c : key) {
      if (!absl::ascii_isalnum(c) && c != '_') return bad("keys are [A-Za-z0-9_]+");
    }
    for (char c : value) {
      if (!absl::ascii_isprint(c)) return bad("values are printable ASCII");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckValue(const ServerFlagRule& f, absl::string_view v) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("server flag ", f.name, "='", Echo(v, 64), "': ", why));
  };
  switch (f.kind) {
    case R::kInt: {
      int64_t n;
      if (!absl::SimpleAtoi(v, &n) || n < f.min || n > f.max) {
        return bad(absl::StrCat("want an integer in [", f.min, ", ", f.max, "]"));
      }
      return absl::OkStatus();
    }
    case R::kDouble: {
      double d;
      const double lo = f.min / 1e6, hi = f.max / 1e6;
      if (!absl::SimpleAtod(v, &d) || !std::isfinite(d) || d < lo || d > hi) {
        return bad(absl::StrCat("want a number in [", lo, ", ", hi, "]"));
      }
      return absl::OkStatus();
    }
    case R::kChoice:
      for (absl::string_view c : absl::StrSplit(f.choices, ',')) {
        if (v == c) return absl::OkStatus();
      }
      return bad(absl::StrCat("want one of ", f.choices));
    case R::kParams:
      return CheckParams(v, bad);
    case R::kBool:
      if (v == "true" || v == "false" || v == "1" || v == "0") return absl::OkStatus();
      return bad("want true or false");
    case R::kText:
      if (v.size() > 4096) return bad("longer than 4096 characters");
      for (char c : v) {
        if (!absl::ascii_isprint(c)) return bad("printable characters only");
      }
      return absl::OkStatus();
  }
  return bad("unknown rule");
}

}  // namespace

const std::vector<ServerFlagRule>& ServerFlagRules() { return Table(); }

const ServerFlagRule* FindServerFlag(absl::string_view name) {
  for (const ServerFlagRule& f : Table()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

const ServerFlagRule& ServerFlag(absl::string_view name) {
  const ServerFlagRule* r = FindServerFlag(name);
  if (r == nullptr) {
    fprintf(stderr, "common/server_flags: no rule for --%s\n", std::string(name).c_str());
    abort();
  }
  return *r;
}

std::string ServerFlagNames(FlagSource source) {
  std::vector<std::string> names;
  for (const ServerFlagRule& f : Table()) {
    if (MaySet(f, source)) names.push_back(f.name);
  }
  return absl::StrJoin(names, ", ");
}

std::string ServerFlagsHelp(FlagSource source) {
  std::vector<std::string> out;
  for (const ServerFlagRule& f : Table()) {
    if (!MaySet(f, source)) continue;
    switch (f.kind) {
      case R::kInt:
        out.push_back(absl::StrCat(f.name, " (", f.min, "..", f.max, ")"));
        break;
      case R::kDouble:
        out.push_back(absl::StrCat(f.name, " (", f.min / 1e6, "..", f.max / 1e6, ")"));
        break;
      case R::kChoice:
        out.push_back(absl::StrCat(f.name, " (", f.choices, ")"));
        break;
      case R::kParams:
        out.push_back(absl::StrCat(f.name, " (k=v,k=v)"));
        break;
      case R::kBool:
        out.push_back(absl::StrCat(f.name, " (true/false)"));
        break;
      case R::kText:
        out.push_back(f.name);
        break;
    }
  }
  return absl::StrJoin(out, ", ");
}

absl::Status CheckServerFlag(absl::string_view name, absl::string_view value, FlagSource source) {
  const ServerFlagRule* rule = FindServerFlag(name);
  if (rule == nullptr || !MaySet(*rule, source)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server flag '", Echo(name, 64), "' is not allowed (allowed: ", ServerFlagNames(source),
        source == kReq ? "; threads, handler and the listen addresses are chosen by the launcher"
                       : "",
        ")"));
  }
  return CheckValue(*rule, value);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseServerArgs(
    const std::vector<std::string>& args, FlagSource source) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view a = args[i];
    if (!absl::ConsumePrefix(&a, "--") && !absl::ConsumePrefix(&a, "-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", Echo(args[i], 64), "' is not a server flag (want --name=value)"));
    }
    std::string name, value;
    if (const size_t eq = a.find('='); eq != absl::string_view::npos) {
      name = std::string(a.substr(0, eq));
      value = std::string(a.substr(eq + 1));
    } else if (const ServerFlagRule* r = FindServerFlag(a); r != nullptr && r->kind == R::kBool) {
      name = std::string(a);
      value = "true";
    } else if (absl::StartsWith(a, "no") && FindServerFlag(a.substr(2)) != nullptr &&
               FindServerFlag(a.substr(2))->kind == R::kBool) {
      name = std::string(a.substr(2));
      value = "false";
    } else if (i + 1 < args.size()) {
      name = std::string(a);
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("server flag --", Echo(a, 64), " needs a value"));
    }
    if (absl::Status s = CheckServerFlag(name, value, source); !s.ok()) return s;
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

}  // namespace rsslab
