#include "loadgen/results/compare.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/summary.h"
#include "loadgen/results/sweep_summary.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::rsslab::v1::Header;

constexpr CompareFigureInfo kFigures[kNumCompareFigures] = {
    {"rss_under_load", "RSS under load", "MiB", false},
    {"rss_after_shrink", "RSS after shrink", "MiB", false},
    {"rss_after_idle", "RSS after idle", "MiB", false},
    {"rss_after_trim_global", "RSS after global trim", "MiB", false},
    {"rss_after_trim_per_thread", "RSS after per-thread trim", "MiB", false},
    {"vmhwm", "VmHWM", "MiB", false},
    {"qps", "QPS", "/s", true},
    {"p50_ms", "p50 latency", "ms", false},
    {"p99_ms", "p99 latency", "ms", false},
    {"threads", "OS threads (max)", "", false},
    {"arenas", "glibc arenas (max)", "", false},
};

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// Run directories at or below `dir` (sorted, bounded in depth and count).
void FindRunDirs(const std::string& dir, int depth, std::vector<std::string>* out) {
  if (static_cast<int>(out->size()) >= kMaxCompareRuns) return;
  if (IsFile(dir + "/events.jsonl")) {
    out->push_back(dir);
    return;  // a run directory's subdirectories (agent logs) are not runs
  }
  if (depth == 0) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> subs;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    const std::string p = dir + "/" + name;
    if (lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) subs.push_back(p);
  }
  closedir(d);
  std::sort(subs.begin(), subs.end());
  for (const std::string& s : subs) FindRunDirs(s, depth - 1, out);
}

CompareGroup& GroupFor(CompareSide* side, bool sweep, const std::string& name, int threads,
                       const std::string& allocator, const std::string& env) {
  for (CompareGroup& g : side->groups) {
    if (g.sweep == sweep && g.name == name && g.threads == threads &&
        (sweep || (g.allocator == allocator && g.env == env))) {
      return g;
    }
  }
  CompareGroup g;
  g.sweep = sweep;
  g.name = name;
  g.threads = threads;
  g.allocator = allocator;
  g.env = env;
  side->groups.push_back(g);
  return side->groups.back();
}

double EffectiveScale(const Header& h) {
  if (h.scenario().load_defaults().scale() > 0) return h.scenario().load_defaults().scale();
  if (h.flags().scale() > 0) return h.flags().scale();
  return 1;
}

std::string Fmt(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%g", v);
}

// The first difference between two step lists, as a sentence; empty if equal.
std::string StepDifference(const Header& a, const Header& b) {
  const auto& sa = a.scenario().step();
  const auto& sb = b.scenario().step();
  for (int i = 0; i < std::min(sa.size(), sb.size()); ++i) {
    const std::string ta = sa[i].ShortDebugString();
    const std::string tb = sb[i].ShortDebugString();
    if (ta != tb) {
      return absl::StrFormat("step %d is { %s } in base and { %s } in new", i + 1, ta, tb);
    }
  }
  if (sa.size() != sb.size()) {
    return absl::StrFormat("base has %d steps, new %d", sa.size(), sb.size());
  }
  return "";
}

// Why samples of `base` and `neu` cannot be compared; empty if they can.
std::string Refusal(const CompareSide& bs, const CompareGroup& b, const CompareSide& ns,
                    const CompareGroup& n) {
  std::vector<std::string> why;
  const CompareSetup& ref = bs.setups[b.samples.front().setup];
  std::set<std::string> said;
  auto add = [&](const std::string& s) {
    if (said.insert(s).second) why.push_back(s);
  };
  std::vector<std::string> unfilled;  // "1 of 4 base", per side
  std::string example;
  for (const auto* side : {&b, &n}) {
    const CompareSide& owner = side == &b ? bs : ns;
    int count = 0;
    for (const CompareSample& s : side->samples) {
      if (s.fill && !s.fill->filled() && count++ == 0 && example.empty()) {
        example = absl::StrCat(s.source, ": ", s.fill->verdict());
      }
      const CompareSetup& su = owner.setups[s.setup];
      const double sa = EffectiveScale(ref.header), sb = EffectiveScale(su.header);
      if (sa != sb) {
        add(absl::StrFormat("different scale: %s in %s, %s in %s", Fmt(sa), ref.dir, Fmt(sb),
                            su.dir));
      }
      const std::string d = StepDifference(ref.header, su.header);
      if (!d.empty()) {
        add(absl::StrFormat("different scenario steps (%s; %s against %s)", d, ref.dir, su.dir));
      }
    }
    if (count > 0) {
      unfilled.push_back(absl::StrFormat("%d of %d %s", count, side->samples.size(),
                                         side == &b ? "base" : "new"));
    }
  }
  if (!unfilled.empty()) {
    add(absl::StrFormat("the cache never filled in %s repeats (e.g. %s; raise --scale)",
                        absl::StrJoin(unfilled, " and "), example));
  }
  return absl::StrJoin(why, "; ");
}

// Settings that differ without preventing a comparison.
std::vector<std::string> Differences(const CompareSide& bs, const CompareGroup& b,
                                     const CompareSide& ns, const CompareGroup& n) {
  std::vector<std::string> out;
  const Header& hb = bs.setups[b.samples.front().setup].header;
  const Header& hn = ns.setups[n.samples.front().setup].header;
  auto diff = [&](const std::string& what, std::string x, std::string y) {
    if (x == y) return;
    if (x.empty()) x = "(none)";
    if (y.empty()) y = "(none)";
    out.push_back(absl::StrFormat("%s: { %s } -> { %s }", what, x, y));
  };
  rsslab::v1::LoadSpec fb = hb.flags(), fn = hn.flags();
  fb.clear_scale();
  fn.clear_scale();
  diff("load flags", fb.ShortDebugString(), fn.ShortDebugString());
  rsslab::v1::LoadSpec db = hb.scenario().load_defaults(), dn = hn.scenario().load_defaults();
  db.clear_scale();
  dn.clear_scale();
  diff("load defaults", db.ShortDebugString(), dn.ShortDebugString());
  diff("handler", hb.scenario().sweep().handler(), hn.scenario().sweep().handler());
  rsslab::v1::Sweep wb, wn;  // the matrix's server flags (map order is fixed)
  *wb.mutable_server_flags() = hb.scenario().sweep().server_flags();
  *wn.mutable_server_flags() = hn.scenario().sweep().server_flags();
  diff("server flags", wb.ShortDebugString(), wn.ShortDebugString());
  if (!b.sweep) {
    diff("allocator", b.allocator, n.allocator);
    diff("allocator environment", b.env, n.env);
  }
  return out;
}

std::string Value(int f, double raw) {
  const double v = FigureDisplay(f, raw);
  switch (f) {
    case kFigQps:
      return absl::StrFormat("%.0f", v);
    case kFigP50:
    case kFigP99:
      return absl::StrFormat("%.2f", v);
    case kFigThreads:
    case kFigArenas:
      return v == std::floor(v) ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.1f", v);
    default:
      return absl::StrFormat("%.1f", v);
  }
}

std::string Change(const FigureResult& fr) {
  if (fr.base_median == 0) return fr.new_median == 0 ? "0.0%" : "-";
  return absl::StrFormat("%+.1f%%", fr.change_pct);
}

// "+10.0 [+7.0, +13.0]" in display units; "[none]" without an interval.
std::string ShiftText(int f, const FigureResult& fr) {
  auto v = [f](double raw) {
    const double d = FigureDisplay(f, raw);
    const int digits = f == kFigQps ? 0 : (f == kFigP50 || f == kFigP99) ? 2 : 1;
    return absl::StrFormat("%+.*f", digits, d);
  };
  if (!fr.shift.has_interval) return absl::StrCat(v(fr.shift.shift), " [none]");
  return absl::StrCat(v(fr.shift.shift), " [", v(fr.shift.low), ", ", v(fr.shift.high), "]");
}

std::string Verdict(int f, const FigureResult& fr) {
  if (!fr.significant) return "~";
  const bool up = fr.new_median > fr.base_median;
  return up == FigureInfo(f).higher_is_better ? "better" : "worse";
}

std::string Title(int f) {
  const CompareFigureInfo& i = FigureInfo(f);
  return *i.unit ? absl::StrCat(i.title, " (", i.unit, ")") : i.title;
}

// The sentence for pairs too small to ever be significant; empty otherwise.
std::string TooFew(const PairResult& p, double alpha) {
  const double min_p = MannWhitneyMinP(p.n_base, p.n_new);
  if (min_p < alpha) return "";
  int need = 1;
  while (MannWhitneyMinP(need, need) >= alpha) ++need;
  return absl::StrFormat(
      "%d vs %d repeats: the smallest p the test can give is %.3f, so no change can be "
      "significant at alpha %g; %d vs %d repeats can reach %.3f",
      p.n_base, p.n_new, min_p, alpha, need, need, MannWhitneyMinP(need, need));
}

std::string JsonStr(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) absl::StrAppendFormat(&out, "\\u%04x", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JsonNum(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string JsonList(const std::vector<std::string>& items) {
  std::vector<std::string> q;
  for (const auto& s : items) q.push_back(JsonStr(s));
  return absl::StrCat("[", absl::StrJoin(q, ","), "]");
}

std::string PairName(const PairResult& p) {
  return p.base_label == p.new_label ? p.base_label
                                     : absl::StrCat(p.base_label, " -> ", p.new_label);
}

}  // namespace

const CompareFigureInfo& FigureInfo(int figure) { return kFigures[figure]; }

int FigureByKey(absl::string_view key) {
  for (int f = 0; f < kNumCompareFigures; ++f) {
    if (key == kFigures[f].key) return f;
  }
  return -1;
}

std::string FigureKeys() {
  std::vector<std::string> k;
  for (const auto& f : kFigures) k.push_back(f.key);
  return absl::StrJoin(k, ", ");
}

double FigureDisplay(int figure, double raw) {
  switch (figure) {
    case kFigQps:
    case kFigThreads:
    case kFigArenas:
      return raw;
    case kFigP50:
    case kFigP99:
      return raw / 1000.0;
    default:
      return raw / 1048576.0;
  }
}

std::string CompareGroup::Label() const {
  if (sweep) return absl::StrFormat("%s x %d threads", name, threads);
  std::string l = name.empty() ? "run" : name;
  if (threads > 0) absl::StrAppendFormat(&l, ", %d workers", threads);
  std::vector<std::string> setup;
  if (!allocator.empty()) setup.push_back(allocator);
  if (!env.empty()) setup.push_back(env);
  if (!setup.empty()) absl::StrAppend(&l, " (", absl::StrJoin(setup, ", "), ")");
  return l;
}

namespace {

// A sweep's successful cells, one sample each, grouped by profile and threads.
void AddSweepSamples(const std::string& dir, int setup_index, const std::vector<Event>& events,
                     CompareSide* side_out) {
  CompareSide& side = *side_out;
  const SweepSummary sw = BuildSweepSummary(events);
  std::map<std::string, rsslab::v1::Fingerprint> fingerprints;  // by cell
  for (const Event& e : events) {
    if (e.has_snapshot() && e.snapshot().has_fingerprint()) {
      fingerprints.emplace(e.cell(), e.snapshot().fingerprint());  // the first wins
    }
  }
  for (const CellSummary& c : sw.cells) {
    if (!c.ok) {
      side.notes.push_back(absl::StrFormat("%s: cell %s left out (%s)", dir, c.cell,
                                           c.has_result ? "failed" : "unfinished"));
      continue;
    }
    CompareSample s;
    s.source = absl::StrCat(dir, " cell ", c.cell);
    s.setup = setup_index;
    s.value[kFigRssUnderLoad] = c.value[kUnderLoad];
    s.value[kFigRssAfterShrink] = c.value[kAfterShrink];
    s.value[kFigRssAfterIdle] = c.value[kAfterIdle];
    s.value[kFigRssTrimGlobal] = c.value[kTrimGlobal];
    s.value[kFigRssTrimPerThread] = c.value[kTrimPerThread];
    s.value[kFigVmHwm] = c.value[kHwm];
    s.value[kFigQps] = c.value[kQps];
    s.value[kFigP50] = c.fill_p50_us;
    s.value[kFigP99] = c.value[kP99];
    s.value[kFigThreads] = c.max_threads;
    s.value[kFigArenas] = c.max_arenas;
    s.fill = c.fill;
    if (auto it = fingerprints.find(c.cell); it != fingerprints.end()) s.fingerprint = it->second;
    GroupFor(&side, true, c.profile, c.threads, c.allocator, "").samples.push_back(s);
  }
}

// A completed run, one sample, grouped by scenario, workers and allocator setup.
void AddRunSample(const std::string& dir, int setup_index, const RunSummary& r,
                  const rsslab::v1::Fingerprint* fingerprint, CompareSide* side_out) {
  CompareSide& side = *side_out;
  if (!r.completed) {
    side.notes.push_back(absl::StrFormat("%s: left out (run incomplete%s%s)", dir,
                                         r.error.empty() ? "" : ": ", r.error));
    return;
  }
  CompareSample s;
  s.source = dir;
  s.setup = setup_index;
  auto phase = [&](const char* p) -> double {
    auto it = r.after_phase.find(p);
    return it == r.after_phase.end() ? -1 : it->second.status().rss_bytes();
  };
  s.value[kFigRssUnderLoad] = phase("fill");
  s.value[kFigRssAfterShrink] = phase("shrink");
  s.value[kFigRssAfterIdle] = phase("idle");
  if (r.has_trim) {
    // As in the sweep table: without a per-thread pass the global
    // release is the whole trim.
    const auto& t = r.last_trim;
    s.value[kFigRssTrimGlobal] = t.per_thread() ? t.rss_between_bytes() : t.rss_after_bytes();
    if (t.per_thread()) s.value[kFigRssTrimPerThread] = t.rss_after_bytes();
  }
  s.value[kFigVmHwm] = r.hwm_bytes;
  if (r.load_seconds > 0) s.value[kFigQps] = r.requests / r.load_seconds;
  if (r.latency.count() > 0) {
    // The histogram records nanoseconds; figures are microseconds.
    s.value[kFigP50] = r.latency.Percentile(50) / 1e3;
    s.value[kFigP99] = r.latency.Percentile(99) / 1e3;
  }
  s.value[kFigThreads] = r.threads;
  s.value[kFigArenas] = r.arenas;
  s.fill = r.fill;
  if (fingerprint != nullptr) s.fingerprint = *fingerprint;
  // The allocator variables the server started with (the same in every
  // snapshot of a run): runs with other settings are another group.
  std::string env;
  for (const auto& [phase, snap] : r.after_phase) {
    std::map<std::string, std::string> sorted(snap.allocator_env().begin(),
                                              snap.allocator_env().end());
    std::vector<std::string> kv;
    for (const auto& [k, v] : sorted) kv.push_back(absl::StrCat(k, "=", v));
    env = absl::StrJoin(kv, " ");
    break;
  }
  GroupFor(&side, false, r.scenario, r.workers, r.allocator, env).samples.push_back(s);
}

// DIR@NAME: only the groups named NAME.
absl::Status KeepOnly(const std::string& path, const std::string& root, const std::string& only,
                      CompareSide* side_out) {
  CompareSide& side = *side_out;
  std::vector<std::string> names;
  std::vector<CompareGroup> kept;
  for (CompareGroup& g : side.groups) {
    if (std::find(names.begin(), names.end(), g.name) == names.end()) names.push_back(g.name);
    if (g.name == only) kept.push_back(std::move(g));
  }
  if (kept.empty()) {
    return absl::NotFoundError(absl::StrFormat("%s: no completed %s in %s (it holds: %s)", path,
                                               only, root, absl::StrJoin(names, ", ")));
  }
  side.groups = std::move(kept);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompareSide> LoadCompareSide(const std::string& path) {
  CompareSide side;
  side.path = path;
  // DIR@NAME keeps only the profile (sweeps) or scenario (runs) NAME, so two
  // setups of one sweep can be compared: SWEEP@glibc SWEEP@glibc-arena2.
  std::string root = path, only;
  if (const size_t at = path.rfind('@');
      at != std::string::npos && path.find('/', at) == std::string::npos) {
    root = path.substr(0, at);
    only = path.substr(at + 1);
    if (only.empty()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: nothing after '@' (DIR@PROFILE, e.g. results/sweep@glibc)", path));
    }
  }
  std::vector<std::string> dirs;
  FindRunDirs(std::string(absl::StripSuffix(root, "/")), 4, &dirs);
  if (dirs.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "%s: no events.jsonl in it or below it (give a run or sweep directory)", root));
  }
  for (const std::string& dir : dirs) {
    int skipped = 0;
    absl::StatusOr<std::vector<Event>> events = ReadEvents(dir, &skipped);
    if (!events.ok()) return events.status();
    if (skipped > 0) {
      side.notes.push_back(absl::StrFormat("%s: skipped %d unreadable line(s)", dir, skipped));
    }
    CompareSetup setup;
    setup.dir = dir;
    for (const Event& e : *events) {
      if (e.has_header()) {
        setup.header = e.header();
        break;
      }
    }
    const int setup_index = static_cast<int>(side.setups.size());
    side.setups.push_back(setup);
    if (IsSweepRun(*events)) {
      AddSweepSamples(dir, setup_index, *events, &side);
      continue;
    }
    SummaryBuilder b;
    const rsslab::v1::Fingerprint* fingerprint = nullptr;
    for (const Event& e : *events) {
      b.Add(e);
      if (fingerprint == nullptr && e.has_snapshot() && e.snapshot().has_fingerprint()) {
        fingerprint = &e.snapshot().fingerprint();
      }
    }
    AddRunSample(dir, setup_index, b.summary(), fingerprint, &side);
  }
  if (!only.empty()) {
    if (absl::Status s = KeepOnly(path, root, only, &side); !s.ok()) return s;
  }
  // A group exists only once it has a sample, so every group has one.
  return side;
}

absl::StatusOr<Threshold> ParseThreshold(absl::string_view spec) {
  Threshold t;
  t.spec = std::string(spec);
  const size_t op = spec.find_first_of("<>");
  const std::string form = "use FIGURE>+N% or FIGURE<-N%, e.g. rss_after_idle>+10%";
  if (op == absl::string_view::npos || op == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--fail_if=%s: no '>' or '<' after a figure name; %s", spec, form));
  }
  const std::string name(absl::StripAsciiWhitespace(spec.substr(0, op)));
  t.figure = FigureByKey(name);
  if (t.figure < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--fail_if=%s: unknown figure \"%s\"; figures: %s", spec, name, FigureKeys()));
  }
  t.greater = spec[op] == '>';
  absl::string_view rest = absl::StripAsciiWhitespace(spec.substr(op + 1));
  if (!absl::ConsumeSuffix(&rest, "%")) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--fail_if=%s: the limit must be a percentage ending in %%; %s", spec, form));
  }
  absl::ConsumePrefix(&rest, "+");  // optional: "+10" and "10" are the same
  double pct = 0;
  if (rest.empty() || !absl::SimpleAtod(rest, &pct) || !std::isfinite(pct) ||
      std::fabs(pct) > 1e6) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--fail_if=%s: \"%s%%\" is not a percentage; %s", spec, rest, form));
  }
  t.pct = pct;
  return t;
}

absl::Status CheckFingerprintKey(absl::string_view key) {
  for (const char* k : kFingerprintKeys) {
    if (key == k) return absl::OkStatus();
  }
  bool name = !key.empty() && !absl::ascii_isdigit(key[0]);
  for (char c : key) name = name && (absl::ascii_isupper(c) || absl::ascii_isdigit(c) || c == '_');
  if (name && key.size() <= 128) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "--ignore_fingerprint: unknown field \"%s\"; use %s, or an environment variable's NAME "
      "(e.g. MALLOC_ARENA_MAX)",
      key, absl::StrJoin(kFingerprintKeys, ", ")));
}

std::vector<std::string> FingerprintDifferences(const rsslab::v1::Fingerprint& a,
                                                const rsslab::v1::Fingerprint& b,
                                                const std::vector<std::string>& ignore,
                                                std::vector<std::string>* keys,
                                                const std::string& where_a,
                                                const std::string& where_b) {
  std::vector<std::string> out;
  auto ignored = [&](absl::string_view key) {
    return std::find(ignore.begin(), ignore.end(), key) != ignore.end();
  };
  auto in = [](const std::string& v, const std::string& where) {
    return where.empty() ? v : absl::StrCat(v, " in ", where);
  };
  auto field = [&](const char* key, const char* what, const std::string& x, const std::string& y) {
    // Not recorded on one side (empty): nothing to compare.
    if (x.empty() || y.empty() || x == y || ignored(key)) return;
    out.push_back(absl::StrFormat("%s (%s vs %s)", what, in(x, where_a), in(y, where_b)));
    if (keys != nullptr) keys->push_back(key);
  };
  auto num = [](int v) { return v > 0 ? absl::StrCat(v) : std::string(); };
  field("glibc_version", "glibc version", a.glibc_version(), b.glibc_version());
  field("allocator", "allocator", a.allocator(), b.allocator());
  if (a.allocator() == b.allocator()) {
    field("allocator_version", "allocator version", a.allocator_version(), b.allocator_version());
  }
  if (!ignored("start_env")) {
    std::set<std::string> names;
    for (const auto& kv : a.start_env()) names.insert(kv.first);
    for (const auto& kv : b.start_env()) names.insert(kv.first);
    for (const std::string& n : names) {
      auto ia = a.start_env().find(n), ib = b.start_env().find(n);
      const std::string x = ia == a.start_env().end() ? "unset" : ia->second;
      const std::string y = ib == b.start_env().end() ? "unset" : ib->second;
      if (x == y || ignored(n)) continue;
      out.push_back(absl::StrFormat("%s at start (%s vs %s)", n, in(x, where_a), in(y, where_b)));
      if (keys != nullptr) keys->push_back(n);
    }
  }
  field("cpus_online", "CPUs online", num(a.cpus_online()), num(b.cpus_online()));
  field("cpus_allowed", "CPUs allowed", num(a.cpus_allowed()), num(b.cpus_allowed()));
  field("cgroup_cpu_max", "cgroup CPU limit", a.cgroup_cpu_max(), b.cgroup_cpu_max());
  field("thp_enabled", "transparent huge pages", a.thp_enabled(), b.thp_enabled());
  return out;
}

std::string FingerprintLine(const rsslab::v1::Fingerprint& f) {
  std::vector<std::string> parts;
  auto or_unknown = [](const std::string& v) { return v.empty() ? std::string("?") : v; };
  parts.push_back(absl::StrCat("glibc ", or_unknown(f.glibc_version())));
  parts.push_back(absl::StrCat(or_unknown(f.allocator()),
                               f.allocator_version().empty() ? "" : " ", f.allocator_version()));
  parts.push_back(absl::StrFormat("%d of %d CPUs", f.cpus_allowed(), f.cpus_online()));
  parts.push_back(absl::StrCat("cgroup CPU ", or_unknown(f.cgroup_cpu_max())));
  parts.push_back(absl::StrCat("THP ", or_unknown(f.thp_enabled())));
  std::map<std::string, std::string> env(f.start_env().begin(), f.start_env().end());
  std::vector<std::string> kv;
  for (const auto& [k, v] : env) kv.push_back(absl::StrCat(k, "=", v));
  parts.push_back(absl::StrCat("start env { ", kv.empty() ? "(none)" : absl::StrJoin(kv, " "),
                               " }"));
  return absl::StrJoin(parts, ", ");
}

const char* GateVerdictName(GateVerdict v) {
  switch (v) {
    case GateVerdict::kNoChange: return "no change";
    case GateVerdict::kImprovement: return "improvement";
    case GateVerdict::kRegression: return "regression";
    case GateVerdict::kCantTell: return "can't tell";
  }
  return "?";
}

absl::StatusOr<std::vector<int>> ParseGateFigures(absl::string_view spec) {
  std::vector<int> out;
  for (absl::string_view k : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    k = absl::StripAsciiWhitespace(k);
    if (k == "rss") {
      for (int f : {kFigRssUnderLoad, kFigRssAfterShrink, kFigRssAfterIdle, kFigRssTrimGlobal,
                    kFigRssTrimPerThread}) {
        out.push_back(f);
      }
      continue;
    }
    const int f = FigureByKey(k);
    if (f < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--gate=%s: unknown figure \"%s\"; use rss or figures: %s", spec, k, FigureKeys()));
    }
    out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

GateVerdict CompareResult::Gate(std::vector<std::string>* why) const {
  bool regression = false, cant_tell = false;
  for (const PairResult& p : pairs) {
    for (int f : gate) {
      const FigureResult& fr = p.figure[f];
      if (!fr.present) continue;
      if (fr.verdict == GateVerdict::kRegression) regression = true;
      if (fr.verdict == GateVerdict::kCantTell) cant_tell = true;
      if (why != nullptr) {
        why->push_back(absl::StrFormat("%s %s: %s", PairName(p), FigureInfo(f).key,
                                       GateVerdictName(fr.verdict)));
      }
    }
  }
  return regression ? GateVerdict::kRegression
         : cant_tell ? GateVerdict::kCantTell
                     : GateVerdict::kNoChange;
}

bool CompareResult::Refused() const {
  for (const PairResult& p : pairs) {
    if (!p.refused.empty() && !p.forced) return true;
    if (!p.fingerprint_mismatch.empty()) return true;
  }
  return false;
}

std::vector<std::string> CompareResult::Unreachable() const {
  std::vector<std::string> out;
  for (const Threshold& t : thresholds) {
    bool reachable = false;
    for (const PairResult& p : pairs) {
      const FigureResult& fr = p.figure[t.figure];
      if (fr.present && fr.test.min_p < alpha) reachable = true;
    }
    if (!reachable) out.push_back(t.spec);
  }
  return out;
}

namespace {

using GroupPairs = std::vector<std::pair<const CompareGroup*, const CompareGroup*>>;

// Which groups of the two sides are compared, and how they were paired
// (*pairing): the same key, else the same key across allocator setups
// (runs), else one name a side at equal threads, else one group a side.
GroupPairs PairGroups(const CompareSide& base, const CompareSide& neu, bool sweep,
                      std::string* pairing) {
  std::string& r_pairing = *pairing;
  std::vector<std::pair<const CompareGroup*, const CompareGroup*>> pairs;
  auto same_key = [](const CompareGroup& x, const CompareGroup& y) {
    return x.name == y.name && x.threads == y.threads;
  };
  for (const CompareGroup& b : base.groups) {
    for (const CompareGroup& n : neu.groups) {
      if (same_key(b, n) && b.allocator == n.allocator && b.env == n.env) {
        pairs.push_back({&b, &n});
      }
    }
  }
  r_pairing = sweep ? "by profile x threads" : "by scenario x workers";
  if (pairs.empty() && !sweep) {
    // Runs of one scenario x workers under another allocator setup (the
    // usual before/after): paired when each side has one such group.
    auto count = [&](const CompareSide& side, const CompareGroup& g) {
      return std::count_if(side.groups.begin(), side.groups.end(),
                           [&](const CompareGroup& x) { return same_key(x, g); });
    };
    for (const CompareGroup& b : base.groups) {
      for (const CompareGroup& n : neu.groups) {
        if (same_key(b, n) && count(base, b) == 1 && count(neu, n) == 1) pairs.push_back({&b, &n});
      }
    }
    r_pairing = "by scenario x workers, across allocator setups";
  }
  if (pairs.empty()) {
    std::set<std::string> nb, nn;
    for (const CompareGroup& g : base.groups) nb.insert(g.name);
    for (const CompareGroup& g : neu.groups) nn.insert(g.name);
    if (nb.size() == 1 && nn.size() == 1) {
      for (const CompareGroup& b : base.groups) {
        for (const CompareGroup& n : neu.groups) {
          if (b.threads == n.threads) pairs.push_back({&b, &n});
        }
      }
      r_pairing = absl::StrFormat("%s against %s at equal %s", *nb.begin(), *nn.begin(),
                                  sweep ? "threads" : "workers");
    }
    if (pairs.empty() && base.groups.size() == 1 && neu.groups.size() == 1) {
      pairs.push_back({&base.groups[0], &neu.groups[0]});
      r_pairing = "the one group on each side";
    }
  }
  return pairs;
}

constexpr double kBytesPerMiB = 1048576.0;

GateVerdict Judge(bool higher_is_better, const Shift& s, double floor) {
  if (!s.has_interval) return GateVerdict::kCantTell;
  // The interval with "worse" pointing up.
  const double lo = higher_is_better ? -s.high : s.low;
  const double hi = higher_is_better ? -s.low : s.high;
  if (lo > floor) return GateVerdict::kRegression;
  if (hi < -floor) return GateVerdict::kImprovement;
  if (lo >= -floor && hi <= floor) return GateVerdict::kNoChange;
  return GateVerdict::kCantTell;
}

// Every repeat's fingerprint against the base's first: the first
// difference between the sides (or within one side) in p->fingerprint_mismatch.
// Sweep cells of two different profiles differ in their allocator setup by
// design (the profile is the setup): those fields are not checked there.
void CheckFingerprints(const CompareGroup& b, const CompareGroup& n, const CompareOptions& o,
                       PairResult* p) {
  std::vector<std::string> ignore = o.ignore_fingerprint;
  if (b.sweep && b.name != n.name) {
    for (const char* k : {"allocator", "allocator_version", "start_env"}) ignore.push_back(k);
  }
  const CompareSample* ref = nullptr;
  const CompareGroup* ref_group = nullptr;
  for (const auto* g : {&b, &n}) {
    for (const CompareSample& s : g->samples) {
      if (!s.fingerprint) {
        ++p->unfingerprinted;
      } else if (ref == nullptr) {
        ref = &s;
        ref_group = g;
      }
    }
  }
  if (ref == nullptr) return;
  p->fingerprint = FingerprintLine(*ref->fingerprint);
  for (const auto* g : {&b, &n}) {
    for (const CompareSample& s : g->samples) {
      if (!s.fingerprint || &s == ref) continue;
      const bool across = g != ref_group;
      std::vector<std::string> keys;
      std::vector<std::string> d =
          across ? FingerprintDifferences(*ref->fingerprint, *s.fingerprint, ignore, &keys)
                 : FingerprintDifferences(*ref->fingerprint, *s.fingerprint, ignore, &keys,
                                          ref->source, s.source);
      if (d.empty()) continue;
      p->fingerprint_keys = keys;
      p->fingerprint_mismatch =
          across ? absl::StrCat("base and new differ in ", absl::StrJoin(d, " and "))
                 : absl::StrCat(g == &b ? "base" : "new", " repeats differ in ",
                                absl::StrJoin(d, " and "));
      return;
    }
  }
}

// One pair's figures: medians, change, the U test; the thresholds it crosses
// appended to *crossings (not for a pair refused and not forced).
PairResult ComparePair(const CompareSide& base, const CompareGroup* b, const CompareSide& neu,
                       const CompareGroup* n, const CompareOptions& o,
                       std::vector<Crossing>* crossings) {
  PairResult p;
  p.base_label = b->Label();
  p.new_label = n->Label();
  p.n_base = static_cast<int>(b->samples.size());
  p.n_new = static_cast<int>(n->samples.size());
  p.refused = Refusal(base, *b, neu, *n);
  p.forced = !p.refused.empty() && o.force;
  p.differences = Differences(base, *b, neu, *n);
  CheckFingerprints(*b, *n, o, &p);
  for (int f = 0; f < kNumCompareFigures; ++f) {
    FigureResult& fr = p.figure[f];
    for (const CompareSample& s : b->samples) {
      if (s.value[f] >= 0) fr.base.push_back(s.value[f]);
    }
    for (const CompareSample& s : n->samples) {
      if (s.value[f] >= 0) fr.neu.push_back(s.value[f]);
    }
    fr.present = !fr.base.empty() && !fr.neu.empty();
    if (!fr.present) continue;
    fr.base_median = AggregateValues(fr.base).median;
    fr.new_median = AggregateValues(fr.neu).median;
    fr.change_pct =
        fr.base_median != 0 ? (fr.new_median - fr.base_median) / fr.base_median * 100 : 0;
    fr.test = MannWhitneyU(fr.base, fr.neu);
    fr.significant = fr.test.p < o.alpha;
    fr.shift = HodgesLehmann(fr.base, fr.neu, o.alpha);
    fr.floor = std::max(std::fabs(fr.base_median) * o.floor_pct / 100,
                        std::string(FigureInfo(f).unit) == "MiB" ? o.floor_mib * kBytesPerMiB : 0);
    fr.verdict = Judge(FigureInfo(f).higher_is_better, fr.shift, fr.floor);
  }
  if ((p.refused.empty() || p.forced) && p.fingerprint_mismatch.empty()) {
    for (const Threshold& t : o.thresholds) {
      const FigureResult& fr = p.figure[t.figure];
      if (!fr.present || !fr.significant || fr.base_median == 0) continue;
      if (t.greater ? fr.change_pct > t.pct : fr.change_pct < t.pct) {
        crossings->push_back({t.spec, PairName(p), t.figure, fr.change_pct, fr.test.p});
      }
    }
  }
  return p;
}

}  // namespace

absl::StatusOr<CompareResult> Compare(const CompareSide& base, const CompareSide& neu,
                                      const CompareOptions& o) {
  CompareResult r;
  r.base_path = base.path;
  r.new_path = neu.path;
  r.alpha = o.alpha;
  r.thresholds = o.thresholds;
  r.gate = o.gate;
  r.floor_mib = o.floor_mib;
  r.floor_pct = o.floor_pct;
  for (const auto* side : {&base, &neu}) {
    for (const std::string& n : side->notes) r.notes.push_back(n);
  }
  auto kinds = [](const CompareSide& s) {
    std::set<bool> k;
    for (const CompareGroup& g : s.groups) k.insert(g.sweep);
    return k;
  };
  auto holds = [](const CompareSide& s) {
    std::vector<std::string> l;
    for (const CompareGroup& g : s.groups) l.push_back(g.Label());
    return l.empty() ? std::string("nothing completed") : absl::StrJoin(l, ", ");
  };
  const std::set<bool> kb = kinds(base), kn = kinds(neu);
  if (kb.empty() || kn.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nothing to compare: %s holds no completed cell or run", kb.empty() ? base.path : neu.path));
  }
  if (kb.size() > 1 || kn.size() > 1 || kb != kn) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s and %s mix sweeps and single runs (%s against %s): a sweep's QPS and latency are "
        "its fill step's, a run's are over every load step; compare sweeps with sweeps and runs "
        "with runs",
        base.path, neu.path, holds(base), holds(neu)));
  }
  const bool sweep = *kb.begin();
  const GroupPairs pairs = PairGroups(base, neu, sweep, &r.pairing);
  if (pairs.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "nothing to pair: %s holds %s; %s holds %s (pairs need the same %s on both sides, or one "
        "%s per side)",
        base.path, holds(base), neu.path, holds(neu),
        sweep ? "profile and threads" : "scenario and workers", sweep ? "profile" : "group"));
  }
  std::set<const CompareGroup*> used;
  for (const auto& [b, n] : pairs) {
    used.insert(b);
    used.insert(n);
    PairResult p = ComparePair(base, b, neu, n, o, &r.crossings);
    r.pairs.push_back(std::move(p));
  }
  for (const auto* side : {&base, &neu}) {
    for (const CompareGroup& g : side->groups) {
      if (!used.count(&g)) {
        r.unpaired.push_back(absl::StrFormat("%s only in %s", g.Label(),
                                             side == &base ? "base" : "new"));
      }
    }
  }
  return r;
}

namespace {

// What the shift column and the verdicts mean, one line.
std::string VerdictLegend(const CompareResult& r) {
  return absl::StrFormat(
      "shift: Hodges-Lehmann median of new - base with its %g%% interval; verdict against a "
      "floor of %g MiB and %g%% (both for a regression)",
      (1 - r.alpha) * 100, r.floor_mib, r.floor_pct);
}

// The gate's closing line; empty without --gate.
std::string GateLine(const CompareResult& r) {
  if (r.gate.empty()) return "";
  std::vector<std::string> why;
  const GateVerdict g = r.Gate(&why);
  std::vector<std::string> figures;
  for (int f : r.gate) figures.push_back(FigureInfo(f).key);
  std::vector<std::string> not_clean;
  for (const std::string& w : why) {
    if (!absl::EndsWith(w, ": no change") && !absl::EndsWith(w, ": improvement")) {
      not_clean.push_back(w);
    }
  }
  return absl::StrFormat("gate (%s): %s%s%s", absl::StrJoin(figures, ", "),
                         g == GateVerdict::kNoChange ? "pass" : GateVerdictName(g),
                         not_clean.empty() ? "" : " - ", absl::StrJoin(not_clean, "; "));
}

}  // namespace

std::string CompareText(const CompareResult& r) {
  std::string out = absl::StrFormat("base: %s\nnew:  %s\npairs: %s\n", r.base_path, r.new_path,
                                    r.pairing);
  absl::StrAppendFormat(&out,
                        "test: two-sided Mann-Whitney U over the repeats (exact up to 60 values), alpha %g; "
                        "\"~\" = no significant change\n",
                        r.alpha);
  absl::StrAppend(&out, VerdictLegend(r), "\n");
  for (const PairResult& p : r.pairs) {
    absl::StrAppendFormat(&out, "\n%s  (%d vs %d repeats)\n", PairName(p), p.n_base, p.n_new);
    if (!p.refused.empty()) {
      absl::StrAppend(&out, p.forced ? "  FORCED, not comparable: " : "  NOT COMPARABLE: ",
                      p.refused, p.forced ? "" : " (--force compares anyway, marked)", "\n");
      if (!p.forced) continue;
    }
    if (!p.fingerprint_mismatch.empty()) {
      absl::StrAppend(&out, "  NOT COMPARABLE: ", p.fingerprint_mismatch, "\n");
      continue;
    }
    for (const std::string& d : p.differences) absl::StrAppend(&out, "  differs: ", d, "\n");
    if (!p.fingerprint.empty()) absl::StrAppend(&out, "  fingerprint: ", p.fingerprint, "\n");
    if (p.unfingerprinted > 0) {
      absl::StrAppendFormat(&out, "  fingerprint: not recorded in %d repeat(s) (older runs); not checked there\n",
                            p.unfingerprinted);
    }
    std::vector<std::vector<std::string>> rows = {
        {"figure", "base", "new", "change", "shift [CI]", "verdict", "p", ""}};
    for (int f = 0; f < kNumCompareFigures; ++f) {
      const FigureResult& fr = p.figure[f];
      if (!fr.present) continue;
      rows.push_back({Title(f), Value(f, fr.base_median), Value(f, fr.new_median), Change(fr),
                      ShiftText(f, fr), GateVerdictName(fr.verdict),
                      absl::StrFormat("%.3f", fr.test.p), Verdict(f, fr)});
    }
    std::vector<size_t> w(8, 0);
    for (const auto& row : rows) {
      for (size_t c = 0; c < row.size(); ++c) w[c] = std::max(w[c], row[c].size());
    }
    for (const auto& row : rows) {
      std::string line = "  ";
      for (size_t c = 0; c < row.size(); ++c) {
        const std::string pad(w[c] - row[c].size(), ' ');
        // The figure name and verdict left-aligned, numbers right-aligned.
        line += c == 0 || c == 5 ? row[c] + pad : (c == 7 ? row[c] : pad + row[c]);
        if (c + 1 < row.size()) line += "  ";
      }
      absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
    }
    if (std::string s = TooFew(p, r.alpha); !s.empty()) absl::StrAppend(&out, "  (", s, ")\n");
  }
  for (const std::string& u : r.unpaired) absl::StrAppend(&out, "\nnot compared: ", u);
  if (!r.unpaired.empty()) out += "\n";
  for (const std::string& n : r.notes) absl::StrAppend(&out, "note: ", n, "\n");
  if (!r.thresholds.empty()) {
    out += "\n";
    for (const Crossing& c : r.crossings) {
      absl::StrAppendFormat(&out, "FAIL %s: %s %s changed %+.1f%% (p=%.3f)\n", c.spec, c.pair,
                            FigureInfo(c.figure).key, c.change_pct, c.p);
    }
    if (r.crossings.empty()) {
      std::vector<std::string> specs;
      for (const Threshold& t : r.thresholds) specs.push_back(t.spec);
      absl::StrAppend(&out, "thresholds: none crossed (", absl::StrJoin(specs, ", "), ")\n");
    }
  }
  if (std::string g = GateLine(r); !g.empty()) absl::StrAppend(&out, "\n", g, "\n");
  return out;
}

std::string CompareMarkdown(const CompareResult& r) {
  std::string md = absl::StrFormat(
      "# rsslab compare\n\nBase: `%s`  \nNew: `%s`  \nPairs: %s  \n"
      "Test: two-sided Mann-Whitney U over the repeats (exact up to 60 values), alpha %g; \"~\" = no "
      "significant change.  \n%s.\n",
      r.base_path, r.new_path, r.pairing, r.alpha, VerdictLegend(r));
  for (const PairResult& p : r.pairs) {
    absl::StrAppendFormat(&md, "\n## %s (%d vs %d repeats)\n\n", PairName(p), p.n_base,
                          p.n_new);
    if (!p.refused.empty()) {
      absl::StrAppend(&md, p.forced ? "**FORCED, not comparable:** " : "**Not comparable:** ",
                      p.refused, "\n\n");
      if (!p.forced) continue;
    }
    if (!p.fingerprint_mismatch.empty()) {
      absl::StrAppend(&md, "**Not comparable:** ", p.fingerprint_mismatch, "\n\n");
      continue;
    }
    for (const std::string& d : p.differences) absl::StrAppend(&md, "- differs: ", d, "\n");
    if (!p.fingerprint.empty()) absl::StrAppend(&md, "- fingerprint: ", p.fingerprint, "\n");
    if (p.unfingerprinted > 0) {
      absl::StrAppendFormat(&md, "- fingerprint: not recorded in %d repeat(s) (older runs); not checked there\n",
                            p.unfingerprinted);
    }
    if (!p.differences.empty() || !p.fingerprint.empty() || p.unfingerprinted > 0) md += "\n";
    md += "| figure | base | new | change | shift [CI] | verdict | p | |\n"
          "|---|---:|---:|---:|---:|---|---:|---|\n";
    for (int f = 0; f < kNumCompareFigures; ++f) {
      const FigureResult& fr = p.figure[f];
      if (!fr.present) continue;
      absl::StrAppendFormat(&md, "| %s | %s | %s | %s | %s | %s | %.3f | %s |\n", Title(f),
                            Value(f, fr.base_median), Value(f, fr.new_median), Change(fr),
                            ShiftText(f, fr), GateVerdictName(fr.verdict), fr.test.p,
                            Verdict(f, fr));
    }
    if (std::string s = TooFew(p, r.alpha); !s.empty()) absl::StrAppend(&md, "\n", s, ".\n");
  }
  if (!r.unpaired.empty() || !r.notes.empty()) md += "\n";
  for (const std::string& u : r.unpaired) absl::StrAppend(&md, "- not compared: ", u, "\n");
  for (const std::string& n : r.notes) absl::StrAppend(&md, "- note: ", n, "\n");
  if (!r.thresholds.empty()) {
    md += "\n## Thresholds\n\n";
    for (const Crossing& c : r.crossings) {
      absl::StrAppendFormat(&md, "- **FAIL** `%s`: %s %s changed %+.1f%% (p=%.3f)\n", c.spec,
                            c.pair, FigureInfo(c.figure).key, c.change_pct, c.p);
    }
    if (r.crossings.empty()) md += "None crossed.\n";
  }
  if (std::string g = GateLine(r); !g.empty()) absl::StrAppend(&md, "\n**", g, "**\n");
  return md;
}

std::string CompareJson(const CompareResult& r) {
  std::string j = absl::StrFormat(
      "{\"base\":%s,\"new\":%s,\"pairing\":%s,\"test\":\"mann-whitney-u two-sided\","
      "\"alpha\":%s,\"refused\":%s,\"pairs\":[",
      JsonStr(r.base_path), JsonStr(r.new_path), JsonStr(r.pairing), JsonNum(r.alpha),
      r.Refused() ? "true" : "false");
  for (size_t i = 0; i < r.pairs.size(); ++i) {
    const PairResult& p = r.pairs[i];
    absl::StrAppendFormat(
        &j,
        "%s{\"base\":%s,\"new\":%s,\"n_base\":%d,\"n_new\":%d,\"min_p\":%s,\"refused\":%s,"
        "\"forced\":%s,\"differences\":%s,\"fingerprint\":%s,\"fingerprint_mismatch\":%s,"
        "\"unfingerprinted\":%d,\"figures\":[",
        i ? "," : "", JsonStr(p.base_label), JsonStr(p.new_label), p.n_base, p.n_new,
        JsonNum(MannWhitneyMinP(p.n_base, p.n_new)), JsonStr(p.refused),
        p.forced ? "true" : "false", JsonList(p.differences), JsonStr(p.fingerprint),
        JsonStr(p.fingerprint_mismatch), p.unfingerprinted);
    bool first = true;
    for (int f = 0; f < kNumCompareFigures; ++f) {
      const FigureResult& fr = p.figure[f];
      if (!fr.present) continue;
      auto list = [f](const std::vector<double>& v) {
        std::vector<std::string> s;
        for (double x : v) s.push_back(JsonNum(FigureDisplay(f, x)));
        return absl::StrCat("[", absl::StrJoin(s, ","), "]");
      };
      const CompareFigureInfo& info = FigureInfo(f);
      absl::StrAppendFormat(
          &j,
          "%s{\"figure\":%s,\"title\":%s,\"unit\":%s,\"base_median\":%s,\"new_median\":%s,"
          "\"change_pct\":%s,\"u\":%s,\"p\":%s,\"exact\":%s,\"significant\":%s,\"verdict\":%s,"
          "\"shift\":%s,\"shift_low\":%s,\"shift_high\":%s,\"shift_coverage\":%s,"
          "\"floor\":%s,\"gate_verdict\":%s,"
          "\"base_values\":%s,\"new_values\":%s}",
          first ? "" : ",", JsonStr(info.key), JsonStr(info.title), JsonStr(info.unit),
          JsonNum(FigureDisplay(f, fr.base_median)), JsonNum(FigureDisplay(f, fr.new_median)),
          JsonNum(fr.change_pct), JsonNum(fr.test.u), JsonNum(fr.test.p),
          fr.test.exact ? "true" : "false", fr.significant ? "true" : "false",
          JsonStr(Verdict(f, fr)), JsonNum(FigureDisplay(f, fr.shift.shift)),
          fr.shift.has_interval ? JsonNum(FigureDisplay(f, fr.shift.low)) : "null",
          fr.shift.has_interval ? JsonNum(FigureDisplay(f, fr.shift.high)) : "null",
          JsonNum(fr.shift.coverage), JsonNum(FigureDisplay(f, fr.floor)),
          JsonStr(GateVerdictName(fr.verdict)), list(fr.base), list(fr.neu));
      first = false;
    }
    j += "]}";
  }
  j += "],\"crossings\":[";
  for (size_t i = 0; i < r.crossings.size(); ++i) {
    const Crossing& c = r.crossings[i];
    absl::StrAppendFormat(&j, "%s{\"threshold\":%s,\"pair\":%s,\"figure\":%s,\"change_pct\":%s,"
                          "\"p\":%s}",
                          i ? "," : "", JsonStr(c.spec), JsonStr(c.pair),
                          JsonStr(FigureInfo(c.figure).key), JsonNum(c.change_pct), JsonNum(c.p));
  }
  std::vector<std::string> specs;
  for (const Threshold& t : r.thresholds) specs.push_back(t.spec);
  std::vector<std::string> gate;
  for (int f : r.gate) gate.push_back(FigureInfo(f).key);
  absl::StrAppendFormat(&j, "],\"thresholds\":%s,\"unreachable_thresholds\":%s,"
                        "\"not_compared\":%s,\"notes\":%s,\"floor_mib\":%s,\"floor_pct\":%s,"
                        "\"gate\":%s,\"gate_verdict\":%s}\n",
                        JsonList(specs), JsonList(r.Unreachable()), JsonList(r.unpaired),
                        JsonList(r.notes), JsonNum(r.floor_mib), JsonNum(r.floor_pct),
                        JsonList(gate),
                        r.gate.empty() ? "null" : JsonStr(GateVerdictName(r.Gate(nullptr))));
  return j;
}

}  // namespace rsslab
