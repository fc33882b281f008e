#include "loadgen/scenario.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/untrusted_text.h"
#include "common/files.h"
#include "common/units.h"
#include "loadgen/flags_check.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/phase.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace rsslab {
namespace {

using ::google::protobuf::TextFormat;
using ::rsslab::v1::LoadSpec;
using ::rsslab::v1::Scenario;
using ::rsslab::v1::Step;

// Seed 000's cycle, which every built-in runs at its own sizes: fill (cache
// 100 MiB), shrink (10 MiB), idle, trim, a snapshot after each after gc.
std::string CycleSteps(int fill, int shrink, int idle_s) {
  return absl::StrFormat(R"pb(
step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 100 } }
step { name: "fill" load { requests: %d } }
step { name: "after_fill" snapshot { gc: true } }
step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: 10 } }
step { name: "shrink" load { requests: %d } }
step { name: "after_shrink" snapshot { gc: true } }
step { name: "idle" set_phase { phase: "idle" } }
step { name: "idle" wait { seconds: %d } }
step { name: "after_idle" snapshot { gc: true } }
step { name: "trim" set_phase { phase: "trim" gc: true } }
)pb",
                         fill, shrink, idle_s);
}

// The seed 000 experiment, step for step (docs/FIELD-REPORTS.md, seed 000).
// Load parameters are left to the flags so one built-in serves every setup.
std::string SeedText() {
  return absl::StrCat(R"pb(
name: "seed"
description: "Seed 000: fill (96,000 requests, cache 100 MiB), shrink (cache 10 MiB, 48,000 requests), idle 12 s, trim; a snapshot after each phase, after gc.collect()."
)pb",
                      CycleSteps(96000, 48000, 12));
}

// Seed 000's matrix: every cell a fresh server from rsslab_agent running the
// seed steps. Profiles, threads and repeats can be overridden by flags.
std::string SweepText() {
  return absl::StrCat(R"pb(
name: "sweep"
description: "Seed 000's matrix through rsslab_agent: allocator profiles x worker threads 1, 4, 16, 64 x 5 repeats, each cell a fresh server running fill (96,000 requests, cache 100 MiB), shrink (10 MiB, 48,000), idle 12 s, trim (global, then per thread)."
sweep {
  profiles: [ "glibc", "glibc-arena2", "jemalloc", "jemalloc-bg", "mimalloc", "mimalloc-purge0", "tcmalloc", "tcmalloc-release" ]
  threads: [ 1, 4, 16, 64 ]
  repeats: 5
}
)pb",
                      CycleSteps(96000, 48000, 12));
}

// A short smoke cycle through every kind of step.
std::string QuickText() {
  return absl::StrCat(R"pb(
name: "quick"
description: "Smoke cycle: fill 2,000 requests, shrink 1,000, idle 1 s, trim."
)pb",
                      CycleSteps(2000, 1000, 1));
}

// The soak: seed 000's cycle at a fifth of its size, repeated for
// --duration (which sets the repeat's duration_s), with the server watched
// every 5 s throughout.
std::string SoakText() {
  return absl::StrCat(R"pb(
name: "soak"
description: "Soak: fill (20,000 requests, cache 100 MiB), shrink (cache 10 MiB, 10,000), idle 12 s, trim, repeated for --duration (default 1 h); a snapshot after each phase tagged with its cycle, WatchSnapshots every 5 s; a cycle whose post-idle RSS grows more than 8 MiB or whose thread count grows is flagged."
soak { watch_interval_s: 5 growth_threshold_mb: 8 }
step { name: "soak" repeat { duration_s: 3600
)pb",
                      CycleSteps(20000, 10000, 12), "} }\n");
}

class Collector : public ::google::protobuf::io::ErrorCollector {
 public:
  explicit Collector(absl::string_view origin) : origin_(origin) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(
        absl::StrFormat("%s:%d:%d: %s", origin_, line + 1, column + 1, message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string origin_;
  std::vector<std::string> errors_;
};

// Where a message (or one of its fields) sits in the source, for errors.
class Where {
 public:
  Where(std::string origin, const TextFormat::ParseInfoTree* tree, int line,
        std::string path)
      : origin_(std::move(origin)), tree_(tree), line_(line),
        path_(std::move(path)) {}

  // The nested message `field` (index -1 unless repeated).
  Where Nested(const google::protobuf::Message& parent, absl::string_view field,
               int index, absl::string_view label) const {
    const auto* fd = parent.GetDescriptor()->FindFieldByName(std::string(field));
    const TextFormat::ParseInfoTree* sub =
        tree_ && fd ? tree_->GetTreeForNested(fd, index) : nullptr;
    int line = line_;
    if (tree_ && fd) {
      const auto loc = tree_->GetLocation(fd, index);
      if (loc.line >= 0) line = loc.line;
    }
    return Where(origin_, sub, line,
                 path_.empty() ? std::string(label)
                               : absl::StrCat(path_, ": ", label));
  }

  // "file:line: path: " for the field `field` of `msg` (or the message).
  std::string At(const google::protobuf::Message& msg,
                 absl::string_view field = "") const {
    int line = line_;
    if (tree_ && !field.empty()) {
      const auto* fd = msg.GetDescriptor()->FindFieldByName(std::string(field));
      if (fd) {
        const auto loc = tree_->GetLocation(fd, fd->is_repeated() ? 0 : -1);
        if (loc.line >= 0) line = loc.line;
      }
    }
    std::string at = line >= 0 ? absl::StrCat(origin_, ":", line + 1)
                               : origin_;
    return path_.empty() ? at : absl::StrCat(at, ": ", path_);
  }

 private:
  std::string origin_;
  const TextFormat::ParseInfoTree* tree_;
  int line_;
  std::string path_;
};

void CheckLayerAt(const LoadSpec& s, const Where& w,
                  std::vector<std::string>* errors) {
  auto add = [&](absl::string_view field, absl::string_view what) {
    errors->push_back(absl::StrCat(w.At(s, field), ": ", what));
  };
  if (s.rate() < 0 || !std::isfinite(s.rate())) {
    add("rate", "rate must be a positive number of requests per second");
  }
  if (s.rate() > 0 && s.concurrency() > 0) {
    add("concurrency",
        "rate (open loop: requests leave on a schedule) and concurrency "
        "(closed loop: a fixed number in flight) cannot both hold; set one "
        "(cap an open loop's in-flight RPCs with max_outstanding)");
  }
  if (!s.arrival().empty() && s.arrival() != "constant" &&
      s.arrival() != "poisson") {
    add("arrival", absl::StrFormat("unknown arrival \"%s\" (constant or poisson)",
                                   s.arrival()));
  }
  if (!s.arrival().empty() && s.rate() == 0 && s.concurrency() > 0) {
    add("arrival", "arrival applies to an open loop (rate), not to concurrency");
  }
  if (s.max_outstanding() > 0 && s.concurrency() > 0) {
    add("max_outstanding",
        "max_outstanding caps an open loop; a closed loop's in-flight count "
        "is its concurrency");
  }
  if (s.concurrency() > 0 && s.channels() > s.concurrency()) {
    add("channels", absl::StrFormat(
                        "%d channels for %d outstanding RPCs would leave "
                        "channels idle; use channels <= concurrency",
                        s.channels(), s.concurrency()));
  }
  if (s.duration_s() < 0 || !std::isfinite(s.duration_s())) {
    add("duration_s", "duration_s must be positive");
  }
  if (s.requests() > 0 && s.duration_s() > 0) {
    add("duration_s",
        "requests and duration_s are alternatives: a step ends after a count "
        "or after a time, set one");
  }
  if (s.warmup_s() < 0 || !std::isfinite(s.warmup_s())) {
    add("warmup_s", "warmup_s must be positive");
  }
  if (s.warmup_s() > 0 && s.warmup_requests() > 0) {
    add("warmup_requests", "warmup_s and warmup_requests are alternatives");
  }
  if (s.scale() < 0 || !std::isfinite(s.scale())) {
    add("scale", "scale must be a positive factor");
  }
  // The call's name and request are checked against the .proto files when
  // the loadgen loads them (loadgen/proto_call.h); here only their size.
  if (s.call().size() > 512) add("call", "call is longer than 512 characters");
  if (s.data().size() > (1 << 20)) add("data", "data is longer than 1 MiB");
  if (s.data_file().size() > 4096) add("data_file", "data_file is longer than 4096 characters");
  if (!s.data().empty() && !s.data_file().empty()) {
    add("data_file", "data and data_file are alternatives; set one");
  }
  // Upper bounds (loadgen/flags_check.h).
  CheckLoadBounds(s, [&](absl::string_view field, const std::string& what) { add(field, what); });
}

bool UsesControl(const Step& step) {
  switch (step.kind_case()) {
    case Step::kSetPhase:
    case Step::kSnapshot:
    case Step::kTrim:
      return true;
    case Step::kRepeat:
      for (const Step& s : step.repeat().step()) {
        if (UsesControl(s)) return true;
      }
      return false;
    default:
      return false;
  }
}

uint64_t SatMul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

uint64_t SatAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<uint64_t>::max() : r;
}

// What one pass over a list of steps sends and takes at most.
struct StepTotals {
  uint64_t requests = 0;  // from count-bound load steps, warm-up included (saturating)
  double seconds = 0;     // from what bounds time (a closed loop's count adds none)
};

// Totals of `steps`, refusing (first error only, naming the step where the
// bound is crossed, `where` its path) a list whose requests or time pass
// the bounds, nested lists first. A repeat multiplies its list by `times`;
// one with only duration_s stops after the iteration running at that time.
absl::Status TotalsOf(const google::protobuf::RepeatedPtrField<Step>& steps,
                      const LoadSpec& defaults, const LoadSpec& flags,
                      const std::string& where, StepTotals* out) {
  for (int i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const std::string at = absl::StrCat(
        where, step.name().empty() ? absl::StrFormat("step %d", i + 1)
                                   : absl::StrFormat("step %d \"%s\"", i + 1, Echo(step.name(), 64)));
    StepTotals t;
    std::string how;
    if (step.has_wait()) {
      t.seconds = step.wait().seconds();
    } else if (step.has_load()) {
      absl::StatusOr<LoadSpec> l = ResolveLoad(step.load(), defaults, flags);
      if (!l.ok()) continue;  // CheckSteps says why
      if (l->duration_s() > 0) {
        t.seconds = l->duration_s() + l->warmup_s();
      } else {
        t.requests = SatAdd(l->requests(), l->warmup_requests());
        if (l->rate() > 0) t.seconds = static_cast<double>(t.requests) / l->rate();
      }
      how = absl::StrCat(at, ": load");
    } else if (step.has_repeat()) {
      const rsslab::v1::RepeatStep& r = step.repeat();
      StepTotals once;
      if (absl::Status s = TotalsOf(r.step(), defaults, flags, absl::StrCat(at, ": repeat: "), &once);
          !s.ok()) {
        return s;
      }
      const uint64_t times = r.times() > 0 ? r.times() : 1;  // duration only: time bounds it
      t.requests = SatMul(once.requests, times);
      t.seconds = r.times() > 0 ? static_cast<double>(r.times()) * once.seconds
                                : std::numeric_limits<double>::infinity();
      if (r.duration_s() > 0) t.seconds = std::min(t.seconds, r.duration_s() + once.seconds);
      how = absl::StrFormat("%s: repeat (%u x %u requests)", at, times, once.requests);
    }
    out->requests = SatAdd(out->requests, t.requests);
    out->seconds += t.seconds;
    if (out->requests > static_cast<uint64_t>(kMaxPlanRequests)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the steps up to here would send %s requests (repeat counts x requests, "
          "warm-up included); a run sends at most %d",
          how.empty() ? at : how,
          out->requests == std::numeric_limits<uint64_t>::max() ? std::string("over 1.8e19")
                                                                : absl::StrFormat("%.4g", static_cast<double>(out->requests)),
          kMaxPlanRequests));
    }
    if (!(out->seconds <= kMaxRunTimeS)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the steps up to here would run for %.3g s (repeat counts x step durations, "
          "requests / rate); the maximum run time is %.0f s (30 days)",
          at, out->seconds, kMaxRunTimeS));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckPlanBounds(const rsslab::v1::Scenario& scenario, const LoadSpec& flags,
                             absl::string_view origin) {
  StepTotals totals;
  return TotalsOf(scenario.step(), scenario.load_defaults(), flags,
                  origin.empty() ? "" : absl::StrCat(origin, ": "), &totals);
}

namespace {

// Every string of the scenario: no control characters (they would reach the
// terminal, the summary and the logs as they are) and a sane length.
void CheckStrings(const google::protobuf::Message& m, const std::string& path,
                  absl::string_view origin, std::vector<std::string>* errors) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const google::protobuf::FieldDescriptor* f : fields) {
    const std::string at = path.empty() ? f->name() : absl::StrCat(path, ".", f->name());
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n && errors->size() < 20; ++i) {
      if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
        const google::protobuf::Message& sub =
            f->is_repeated() ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        CheckStrings(sub, f->is_repeated() ? absl::StrCat(at, "[", i, "]") : at, origin, errors);
      } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
        const std::string v = f->is_repeated() ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
        const size_t max = f->name() == "description" ? 4096 : 1024;
        if (v.size() > max) {
          errors->push_back(absl::StrFormat("%s: %s is %u bytes; at most %u", origin, at,
                                            v.size(), max));
        } else if (std::any_of(v.begin(), v.end(), [](char c) {
                     return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
                   })) {
          errors->push_back(absl::StrFormat(
              "%s: %s holds a control character (\"%s\"); scenario text is printed to "
              "terminals and logs, so none is allowed",
              origin, at, Echo(v, 64)));
        } else if (!IsValidUtf8(v)) {
          // It would be written into events.jsonl's header, which then no
          // longer parses (report, --resume and merge could not read it).
          errors->push_back(absl::StrFormat("%s: %s is not valid UTF-8 (\"%s\")", origin, at,
                                            Echo(v, 64)));
        }
      }
    }
  }
}

void CheckSteps(const google::protobuf::Message& parent,
                const google::protobuf::RepeatedPtrField<Step>& steps,
                const Where& w, const LoadSpec& defaults,
                const LoadSpec& flags, std::vector<std::string>* errors,
                int depth = 0) {
  for (int i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const std::string label =
        step.name().empty() ? absl::StrFormat("step %d", i + 1)
                            : absl::StrFormat("step %d \"%s\"", i + 1, step.name());
    const Where sw = w.Nested(parent, "step", i, label);
    auto add = [&](const google::protobuf::Message& m, absl::string_view field,
                   const Where& where, absl::string_view what) {
      errors->push_back(absl::StrCat(where.At(m, field), ": ", what));
    };
    switch (step.kind_case()) {
      case Step::KIND_NOT_SET:
        add(step, "", sw,
            "empty step: give it one of set_phase, load, wait, snapshot, "
            "trim, repeat");
        break;
      case Step::kSetPhase: {
        const auto& p = step.set_phase();
        const Where pw = sw.Nested(step, "set_phase", -1, "set_phase");
        if (!ParsePhase(p.phase())) {
          add(p, "phase", pw,
              absl::StrFormat("unknown phase \"%s\" (%s)", p.phase(), AllowedPhases()));
        }
        if (p.has_cache_limit_mb() && p.cache_limit_mb() < 0) {
          add(p, "cache_limit_mb", pw,
              absl::StrFormat("cache_limit_mb is %d; a cache limit cannot be "
                              "negative",
                              p.cache_limit_mb()));
        } else if (p.has_cache_limit_mb()) {
          if (auto b = MiBToBytes(p.cache_limit_mb(), "cache_limit_mb", 0, kMaxCacheLimitMb);
              !b.ok()) {
            add(p, "cache_limit_mb", pw, b.status().message());
          }
        }
        break;
      }
      case Step::kLoad: {
        const Where lw = sw.Nested(step, "load", -1, "load");
        const size_t before = errors->size();
        CheckLayerAt(step.load(), lw, errors);
        if (errors->size() == before) {
          auto resolved = ResolveLoad(step.load(), defaults, flags);
          if (!resolved.ok()) {
            add(step.load(), "", lw, resolved.status().message());
          }
        }
        break;
      }
      case Step::kWait: {
        const double s = step.wait().seconds();
        if (!(s > 0) || !std::isfinite(s)) {
          add(step.wait(), "seconds",
              sw.Nested(step, "wait", -1, "wait"),
              "wait needs seconds > 0");
        } else if (s > kMaxDurationS) {
          add(step.wait(), "seconds", sw.Nested(step, "wait", -1, "wait"),
              absl::StrFormat("wait seconds must be at most %.0f (30 days); got %g",
                              kMaxDurationS, s));
        }
        break;
      }
      case Step::kSnapshot:
        break;
      case Step::kTrim:
        // Checked here, not by the server after the load before it ran.
        if (!rsslab::v1::TrimMode_IsValid(step.trim().mode())) {
          add(step.trim(), "mode", sw.Nested(step, "trim", -1, "trim"),
              absl::StrFormat("trim mode %d is not one of 0 (default), 1 (global only), 2 (per "
                              "thread), 3 (free-block purge)",
                              static_cast<int>(step.trim().mode())));
        }
        break;
      case Step::kRepeat: {
        const auto& r = step.repeat();
        const Where rw = sw.Nested(step, "repeat", -1, "repeat");
        if (r.times() == 0 && !(r.duration_s() > 0)) {
          add(r, "", rw, "repeat needs times > 0 or duration_s > 0");
        }
        if (r.duration_s() < 0) {
          add(r, "duration_s", rw, "duration_s must be positive");
        } else if (!(r.duration_s() <= kMaxDurationS)) {
          add(r, "duration_s", rw,
              absl::StrFormat("duration_s must be at most %.0f (30 days); got %g",
                              kMaxDurationS, r.duration_s()));
        }
        if (r.step_size() == 0) {
          add(r, "", rw, "repeat has no steps");
        }
        if (depth + 1 > kMaxRepeatDepth) {
          add(r, "", rw,
              absl::StrFormat("repeat is nested %d deep; at most %d levels of repeat are allowed",
                              depth + 1, kMaxRepeatDepth));
          break;
        }
        CheckSteps(r, r.step(), rw, defaults, flags, errors, depth + 1);
        break;
      }
    }
  }
}

// The sweep block: names the agent can take, a matrix of sane size.
void CheckSweep(const Scenario& sc, const Where& top, std::vector<std::string>* errors) {
  // The agent checks names again; checking here fails before any launch.
  const auto& sw = sc.sweep();
  const Where ww = top.Nested(sc, "sweep", -1, "sweep");
  auto is_name = [](absl::string_view n) {
    if (n.empty() || n.size() > 100) return false;
    for (char c : n) {
      if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
    }
    return true;
  };
  if (sw.profiles_size() == 0) {
    errors->push_back(absl::StrCat(ww.At(sw, ""),
                                   ": sweep needs at least one profile"));
  }
  for (const std::string& p : sw.profiles()) {
    if (!is_name(p)) {
      errors->push_back(absl::StrFormat(
          "%s: profile \"%s\" is not a profile name ([A-Za-z0-9._-]+)",
          ww.At(sw, "profiles"), p));
    }
  }
  if (sw.threads_size() == 0) {
    errors->push_back(absl::StrCat(ww.At(sw, ""),
                                   ": sweep needs at least one thread count"));
  }
  for (int t : sw.threads()) {
    if (t < 1 || t > 1024) {
      errors->push_back(absl::StrFormat(
          "%s: thread count %d is outside 1..1024", ww.At(sw, "threads"), t));
    }
  }
  if (sw.repeats() > 1000) {
    errors->push_back(absl::StrFormat("%s: %d repeats is absurd (at most 1000)",
                                      ww.At(sw, "repeats"), sw.repeats()));
  }
  if (!sw.handler().empty() && !is_name(sw.handler())) {
    errors->push_back(absl::StrFormat(
        "%s: handler \"%s\" must be a handler name such as web_worker",
        ww.At(sw, "handler"), sw.handler()));
  }
}

// The soak block: a watch interval the server can keep, a sane threshold.
void CheckSoak(const Scenario& sc, const Where& top, std::vector<std::string>* errors) {
  const auto& k = sc.soak();
  const Where kw = top.Nested(sc, "soak", -1, "soak");
  if (k.watch_interval_s() < 0 || !std::isfinite(k.watch_interval_s()) ||
      (k.watch_interval_s() > 0 && k.watch_interval_s() < 0.01)) {
    errors->push_back(absl::StrCat(kw.At(k, "watch_interval_s"),
                                   ": watch_interval_s must be at least 0.01 s "
                                   "(0 = every 5 s)"));
  }
  if (k.growth_threshold_mb() < 0 || !std::isfinite(k.growth_threshold_mb())) {
    errors->push_back(absl::StrCat(kw.At(k, "growth_threshold_mb"),
                                   ": growth_threshold_mb must be positive"));
  }
  if (sc.has_sweep()) {
    errors->push_back(absl::StrCat(kw.At(k, ""),
                                   ": a scenario is a soak or a sweep, not both"));
  }
}

absl::StatusOr<Scenario> ParseAndCheck(absl::string_view text,
                                       absl::string_view origin,
                                       const LoadSpec& flags) {
  Scenario sc;
  Collector collector(origin);
  TextFormat::ParseInfoTree tree;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  parser.WriteLocationsTo(&tree);
  // Each repeat level is two messages (step, repeat); a load step's params
  // two more. Past this the parser stops, long before the stack would.
  parser.SetRecursionLimit(2 * kMaxRepeatDepth + 8);
  if (!parser.ParseFromString(std::string(text), &sc)) {
    std::vector<std::string> errs = collector.errors();
    if (errs.empty()) errs.push_back(absl::StrCat(origin, ": cannot parse"));
    for (std::string& e : errs) {
      if (absl::StrContains(e, "too deep")) {
        e = absl::StrCat(e.substr(0, e.find(": ", origin.size() + 1)),
                         ": nested too deep: at most ", kMaxRepeatDepth,
                         " levels of repeat are allowed");
      }
    }
    return absl::InvalidArgumentError(absl::StrJoin(errs, "\n"));
  }
  std::vector<std::string> errors;
  const Where top(std::string(origin), &tree, -1, "");
  if (sc.step_size() == 0) {
    errors.push_back(absl::StrCat(origin, ": the scenario has no steps"));
  }
  if (sc.has_sweep()) CheckSweep(sc, top, &errors);
  if (sc.has_soak()) CheckSoak(sc, top, &errors);
  if (sc.has_load_defaults()) {
    CheckLayerAt(sc.load_defaults(),
                 top.Nested(sc, "load_defaults", -1, "load_defaults"), &errors);
  }
  // The flags are a layer too, but their problems are the command line's.
  for (const std::string& e : CheckLoadLayer(flags, "flags")) {
    errors.push_back(e);
  }
  CheckStrings(sc, "", origin, &errors);
  if (errors.empty()) {
    CheckSteps(sc, sc.step(), top, sc.load_defaults(), flags, &errors);
  }
  if (errors.empty()) {
    if (absl::Status s = CheckPlanBounds(sc, flags, origin); !s.ok()) {
      errors.push_back(std::string(s.message()));
    }
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  return sc;
}

// First layer with a non-default value wins.
template <typename T, typename Get>
T First(const LoadSpec* const* layers, Get get, T fallback) {
  for (int i = 0; i < 3; ++i) {
    const T v = get(*layers[i]);
    if (v != T{}) return v;
  }
  return fallback;
}

}  // namespace

std::vector<std::string> CheckLoadLayer(const LoadSpec& spec,
                                        absl::string_view where) {
  std::vector<std::string> errors;
  // Flag names are the field names with "--" (duration_s is --duration).
  CheckLayerAt(spec, Where(std::string(where), nullptr, -1, ""), &errors);
  return errors;
}

absl::StatusOr<LoadSpec> ResolveLoad(const LoadSpec& step,
                                     const LoadSpec& defaults,
                                     const LoadSpec& flags) {
  const LoadSpec* layers[] = {&step, &defaults, &flags};
  LoadSpec out;
  // Mode: the first layer that says rate or concurrency decides.
  const LoadSpec* mode_layer = nullptr;
  for (const LoadSpec* l : layers) {
    if (l->rate() > 0 || l->concurrency() > 0) {
      mode_layer = l;
      break;
    }
  }
  if (mode_layer != nullptr && mode_layer->rate() > 0) {
    out.set_rate(mode_layer->rate());
    out.set_arrival(First<std::string>(
        layers, [](const LoadSpec& l) { return l.arrival(); }, "constant"));
    out.set_max_outstanding(First<uint32_t>(
        layers, [](const LoadSpec& l) { return l.max_outstanding(); },
        kDefaultMaxOutstanding));
  } else {
    out.set_concurrency(mode_layer != nullptr ? mode_layer->concurrency()
                                              : kDefaultConcurrency);
  }
  const uint32_t channels = First<uint32_t>(
      layers, [](const LoadSpec& l) { return l.channels(); }, 0);
  if (channels == 0) {
    out.set_channels(out.concurrency() > 0
                         ? std::min(kDefaultChannels, out.concurrency())
                         : kDefaultChannels);
  } else if (out.concurrency() > 0 && channels > out.concurrency()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d channels for %d outstanding RPCs would leave channels idle; use "
        "channels <= concurrency",
        channels, out.concurrency()));
  } else {
    out.set_channels(channels);
  }
  // End condition: the first layer that sets a count or a time.
  const double scale = First<double>(
      layers, [](const LoadSpec& l) { return l.scale(); }, 1.0);
  out.set_scale(scale);
  bool ends = false;
  for (const LoadSpec* l : layers) {
    if (l->requests() > 0) {
      out.set_requests(std::max<uint64_t>(
          1, static_cast<uint64_t>(std::llround(l->requests() * scale))));
      ends = true;
      break;
    }
    if (l->duration_s() > 0) {
      out.set_duration_s(l->duration_s());
      ends = true;
      break;
    }
  }
  if (!ends) {
    return absl::InvalidArgumentError(
        "a load step needs requests or duration_s (in the step, in "
        "load_defaults, or --requests / --duration)");
  }
  for (const LoadSpec* l : layers) {
    if (l->warmup_s() > 0 || l->warmup_requests() > 0) {
      out.set_warmup_s(l->warmup_s());
      out.set_warmup_requests(l->warmup_requests());
      break;
    }
  }
  out.set_deadline_ms(First<uint32_t>(
      layers, [](const LoadSpec& l) { return l.deadline_ms(); },
      kDefaultDeadlineMs));
  out.set_seed(First<uint64_t>(
      layers, [](const LoadSpec& l) { return l.seed(); }, 1));
  out.set_payload_bytes(First<uint32_t>(
      layers, [](const LoadSpec& l) { return l.payload_bytes(); }, 0));
  out.set_return_body(step.return_body() || defaults.return_body() ||
                      flags.return_body());
  // The call: the first layer that names one; its request, the first layer
  // that gives data or a data file (a step may change only the data).
  out.set_call(First<std::string>(
      layers, [](const LoadSpec& l) { return l.call(); }, ""));
  for (const LoadSpec* l : layers) {
    if (!l->data().empty() || !l->data_file().empty()) {
      out.set_data(l->data());
      out.set_data_file(l->data_file());
      break;
    }
  }
  out.set_stream_messages(First<uint32_t>(
      layers, [](const LoadSpec& l) { return l.stream_messages(); }, 0));
  out.set_stream_interval_ms(First<double>(
      layers, [](const LoadSpec& l) { return l.stream_interval_ms(); }, 0));
  // Params merge: the step's override the defaults', which override flags'.
  for (int i = 2; i >= 0; --i) {
    for (const auto& [k, v] : layers[i]->params()) (*out.mutable_params())[k] = v;
  }
  return out;
}

absl::StatusOr<Scenario> ParseScenario(absl::string_view text,
                                       absl::string_view origin,
                                       const LoadSpec& flags) {
  return ParseAndCheck(text, origin, flags);
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path,
                                          const LoadSpec& flags) {
  absl::StatusOr<std::string> text =
      ReadFileBounded(path, kScenarioFileMaxBytes, "--scenario");
  if (!text.ok()) return text.status();
  return ParseAndCheck(*text, path, flags);
}

std::vector<std::string> BuiltinNames() {
  return {"seed", "quick", "sweep", "soak"};
}

absl::StatusOr<std::string> BuiltinText(absl::string_view name) {
  if (name == "seed") return SeedText();
  if (name == "quick") return QuickText();
  if (name == "sweep") return SweepText();
  if (name == "soak") return SoakText();
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown builtin scenario \"%s\" (known: %s)", name,
                      absl::StrJoin(BuiltinNames(), ", ")));
}

absl::StatusOr<Scenario> BuiltinScenario(absl::string_view name,
                                         const LoadSpec& flags) {
  absl::StatusOr<std::string> text = BuiltinText(name);
  if (!text.ok()) return text.status();
  return ParseAndCheck(*text, absl::StrCat("builtin:", name), flags);
}

Scenario AdHocScenario() {
  Scenario sc;
  sc.set_name("load");
  sc.set_description("One load step from the command-line flags.");
  Step* step = sc.add_step();
  step->set_name("load");
  step->mutable_load();
  return sc;
}

void ApplySoakDuration(Scenario* scenario, double seconds) {
  for (Step& s : *scenario->mutable_step()) {
    if (s.has_repeat()) {
      s.mutable_repeat()->set_duration_s(seconds);
      s.mutable_repeat()->set_times(0);
    }
  }
}

namespace {

void SetWaits(google::protobuf::RepeatedPtrField<Step>* steps, double seconds) {
  for (Step& s : *steps) {
    if (s.has_wait()) s.mutable_wait()->set_seconds(seconds);
    if (s.has_repeat()) SetWaits(s.mutable_repeat()->mutable_step(), seconds);
  }
}

}  // namespace

void ApplyWaitSeconds(Scenario* scenario, double seconds) {
  SetWaits(scenario->mutable_step(), seconds);
}

bool NeedsControl(const Scenario& scenario) {
  if (scenario.has_soak()) return true;  // the watch stream
  for (const Step& s : scenario.step()) {
    if (UsesControl(s)) return true;
  }
  return false;
}

}  // namespace rsslab
