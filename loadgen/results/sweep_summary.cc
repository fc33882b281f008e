#include "loadgen/results/sweep_summary.h"

#include <algorithm>
#include <climits>
#include <iterator>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "loadgen/results/histogram.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/untrusted_text.h"
#include "common/files.h"
#include "loadgen/results/fill_check.h"
#include "memory/alloc/version.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;

constexpr SweepMetricInfo kMetrics[kNumSweepMetrics] = {
    {"under_load_mib", "under load MiB"},
    {"after_shrink_mib", "after shrink MiB"},
    {"after_idle_mib", "after idle MiB"},
    {"trim_global_mib", "trim (global) MiB"},
    {"trim_per_thread_mib", "trim (per-thread) MiB"},
    {"hwm_mib", "VmHWM MiB"},
    {"qps", "fill QPS"},
    {"p99_ms", "fill p99 ms"},
};

// The marker after a median whose repeats spread too far ("" otherwise).
std::string SpreadMark(const Aggregate& a, int metric) {
  return IsMemoryMetric(metric) && SpreadTooWide(a) ? kSpreadMark : "";
}

std::string Cell(const Aggregate& a, int metric) {
  if (a.n == 0) return "-";
  if (a.n == 1 || a.min == a.max) return FormatMetric(metric, a.median);
  return absl::StrCat(FormatMetric(metric, a.median), " (",
                      FormatMetric(metric, a.min), "-",
                      FormatMetric(metric, a.max), ")", SpreadMark(a, metric));
}

// Columns in a terminal: the dagger is one column but three bytes.
size_t DisplayWidth(const std::string& s) {
  size_t w = 0;
  for (unsigned char ch : s) w += (ch & 0xC0) != 0x80 ? 1 : 0;
  return w;
}

// summary.csv's spread column: the marked measures' keys joined by ';',
// "none", or "n/a" when no measure has 2 repeats to judge.
std::string SpreadCsv(const SweepRow& r) {
  if (!SpreadJudged(r)) return "n/a";
  std::vector<std::string> keys;
  for (int m : WideSpreadMetrics(r)) keys.push_back(kMetrics[m].key);
  return keys.empty() ? "none" : absl::StrJoin(keys, ";");
}

// Per-cell bookkeeping while reading the records.
struct CellState {
  CellSummary c;
  std::map<std::string, int64_t> rss_by_phase;  // last snapshot per phase
  int64_t hwm = -1;
  bool have_trim = false;
  bool loaded = false;  // a load step was recorded: no base RSS after it
  rsslab::v1::TrimResult trim;
  FillWatch fill_watch;
};

// "host (2 CPUs, Intel Xeon ..., 15.6 GiB; server CPUs 0, loadgen 1)".
std::string WhereText(const rsslab::v1::HostInfo& h) {
  if (h.hostname().empty()) return h.agent();
  std::string out = absl::StrFormat("%s (%d CPUs, %s, %.1f GiB", h.hostname(), h.cpus(),
                                    h.cpu_model().empty() ? "CPU model unknown" : h.cpu_model(),
                                    h.mem_total_bytes() / 1073741824.0);
  if (!h.server_cpus().empty()) {
    absl::StrAppend(&out, "; server CPUs ", h.server_cpus(), ", loadgen ", h.loadgen_cpus());
  }
  return out + ")";
}

using Attempts = std::map<int, CellState>;  // by attempt number

// A --resume rerun runs every cell without a successful result again after
// its `resumed` record: whatever such a cell recorded before is superseded.
void SupersedeUnfinished(std::map<std::string, Attempts>* cells) {
  for (auto& [id, attempts] : *cells) {
    for (auto& [n, st] : attempts) {
      if (st.c.ok) continue;
      CellState fresh;
      fresh.c.cell = st.c.cell;
      fresh.c.profile = st.c.profile;
      fresh.c.threads = st.c.threads;
      fresh.c.repeat = st.c.repeat;
      fresh.c.index = st.c.index;
      st = fresh;
    }
  }
}

// The attempt that counts: the latest successful one, else the latest. The
// others go to s->superseded.
CellState& CountedAttempt(const std::string& id, Attempts& attempts,
                          const std::vector<SweepCell>& matrix, SweepSummary* s) {
  auto counted = attempts.end();
  for (auto it = attempts.begin(); it != attempts.end(); ++it) {
    if (it->second.c.ok) counted = it;
  }
  if (counted == attempts.end()) counted = std::prev(attempts.end());
  for (auto it = attempts.begin(); it != attempts.end(); ++it) {
    if (it == counted) continue;
    const CellSummary& c = it->second.c;
    s->superseded.push_back({id, it->first, c.ok, c.has_result ? c.error : "no result", c.where});
  }
  CellState& st = counted->second;
  st.c.attempt = counted->first;
  st.c.attempts = static_cast<int>(attempts.size());
  for (const SweepCell& m : matrix) {
    if (st.c.index < 0 && m.id == id) st.c.index = m.index;
  }
  return st;
}

// Cells in matrix order (what --print_cells lists; cells of no known index
// last, in the order they ran), the matrix cells with no record at all, and
// how many count.
void OrderAndCount(const std::vector<SweepCell>& matrix, const std::vector<std::string>& order,
                   SweepSummary* s) {
  std::stable_sort(s->cells.begin(), s->cells.end(),
                   [](const CellSummary& a, const CellSummary& b) {
                     return (a.index < 0 ? INT_MAX : a.index) < (b.index < 0 ? INT_MAX : b.index);
                   });
  std::set<std::string> seen(order.begin(), order.end());
  for (const SweepCell& m : matrix) {
    if (seen.count(m.id) == 0) s->missing.push_back(m.index);
  }
  for (const CellSummary& c : s->cells) s->ok_cells += c.ok ? 1 : 0;
}

}  // namespace

const SweepMetricInfo& MetricInfo(int metric) { return kMetrics[metric]; }

std::string FormatMetric(int metric, double raw) {
  if (raw < 0) return "-";
  switch (metric) {
    case kQps:
      return absl::StrFormat("%.0f", raw);
    case kP99:
      return absl::StrFormat("%.2f", raw / 1000.0);
    default:
      return absl::StrFormat("%.1f", raw / 1048576.0);
  }
}

Aggregate AggregateValues(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(),
                              [](double v) { return v < 0; }),
               values.end());
  Aggregate a;
  a.n = static_cast<int>(values.size());
  if (a.n == 0) return a;
  std::sort(values.begin(), values.end());
  a.min = values.front();
  a.max = values.back();
  a.median = a.n % 2 == 1 ? values[a.n / 2]
                          : (values[a.n / 2 - 1] + values[a.n / 2]) / 2.0;
  return a;
}

bool IsMemoryMetric(int metric) { return metric >= kUnderLoad && metric <= kHwm; }

bool SpreadTooWide(const Aggregate& a) {
  return a.n >= 2 && a.median > 0 && (a.max - a.min) / a.median > kSpreadLimit;
}

std::vector<int> WideSpreadMetrics(const SweepRow& r) {
  std::vector<int> out;
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    if (IsMemoryMetric(m) && SpreadTooWide(r.metric[m])) out.push_back(m);
  }
  return out;
}

bool SpreadJudged(const SweepRow& r) {
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    if (IsMemoryMetric(m) && r.metric[m].n >= 2) return true;
  }
  return false;
}

bool TrimGoalMet(const Aggregate& goal) { return goal.n > 0 && goal.median <= kTrimGoalRatio; }

std::string FormatGoalRatio(double ratio) {
  int digits = 2;
  while (digits < 4 && ratio != kTrimGoalRatio &&
         absl::StrFormat("%.*f", digits, ratio) == absl::StrFormat("%.*f", digits, kTrimGoalRatio)) {
    ++digits;
  }
  return absl::StrFormat("%.*f", digits, ratio);
}

std::string FormatTrimGoal(const Aggregate& goal) {
  if (goal.n == 0) return "-";
  return absl::StrCat(FormatGoalRatio(goal.median), "x ", TrimGoalMet(goal) ? "met" : "missed");
}

bool IsSweepRun(const std::vector<Event>& events) {
  for (const Event& e : events) {
    if (e.has_header() && e.header().scenario().has_sweep()) return true;
    if (!e.cell().empty()) return true;
  }
  return false;
}

namespace {

// One record of a cell's attempt into its state.
void AddCellRecord(const Event& e, CellState& st) {
  // A service's worker records: the service's record (worker_pid 0) that
  // follows them holds the totals and each process.
  if (e.worker_pid() != 0) return;
  if (auto fill = e.has_cell_result() ? st.fill_watch.Finish() : st.fill_watch.Add(e)) {
    st.c.fill = *fill;
  }
  st.c.fill_off = st.fill_watch.off();
  auto snap = [&](const rsslab::v1::Snapshot& sn, bool after_phase) {
    if (after_phase && !e.loadgen_phase().empty()) {
      st.rss_by_phase[e.loadgen_phase()] = sn.status().rss_bytes();
      if (e.loadgen_phase() == "idle" && sn.has_service()) {
        st.c.has_service = true;
        st.c.service_idle = sn.service();
      }
    }
    st.hwm = std::max<int64_t>(st.hwm, sn.status().hwm_bytes());
    st.c.max_threads = std::max(st.c.max_threads, sn.status().threads());
    st.c.max_arenas = std::max(st.c.max_arenas, sn.memory_map().arena_count());
    if (!sn.allocator().empty()) st.c.allocator = sn.allocator();
    if (std::string v = alloc::AllocatorVersionText(sn); !v.empty()) st.c.allocator_version = v;
  };
  switch (e.record_case()) {
    case Event::kSnapshot:
      snap(e.snapshot(), true);
      break;
    case Event::kPhase:
      // The server's RSS before any load: the fill set_phase's reply.
      if (!st.loaded && st.c.base_rss < 0 && e.loadgen_phase() == "fill") {
        st.c.base_rss = static_cast<double>(e.phase().snapshot().status().rss_bytes());
      }
      if (e.phase().has_before()) snap(e.phase().before(), false);
      snap(e.phase().snapshot(), true);
      if (e.phase().has_trim()) {
        st.have_trim = true;
        st.trim = e.phase().trim();
      }
      break;
    case Event::kTrim:
      snap(e.trim().after(), true);
      st.have_trim = true;
      st.trim = e.trim().trim();
      break;
    case Event::kLoad:
      st.loaded = true;
      if (e.loadgen_phase() == "fill") {
        st.c.value[kQps] = e.load().qps();
        st.c.value[kP99] = e.load().latency().p99_us();
        st.c.fill_p50_us = e.load().latency().p50_us();
        if (auto h = Histogram::FromProto(e.load().histogram()); h.ok() && h->count() > 0) {
          st.c.fill_p95_us = h->Percentile(95) / 1e3;
        }
      }
      break;
    case Event::kCellResult: {
      const auto& r = e.cell_result();
      st.c.has_result = true;
      st.c.ok = r.ok();
      st.c.failed_at = r.failed_at();
      st.c.error = r.error();
      st.c.exit = r.server().exit();
      st.c.log_tail = r.server().log_tail();
      st.c.died_before_stop = r.died_before_stop();
      st.c.steps_done = r.steps_done();
      st.c.steps_total = r.steps_total();
      st.c.where = WhereText(r.host());
      if (st.c.allocator_version.empty()) {
        st.c.allocator_version = alloc::LibraryVersionText(st.c.allocator, r.server().mapped_library());
      }
      break;
    }
    default:
      break;
  }
}

// The counted attempt's figures, from what its records left in its state.
void FinishCellValues(CellState& st) {
  auto phase = [&](const char* p) -> double {
    auto it = st.rss_by_phase.find(p);
    return it == st.rss_by_phase.end() ? -1 : static_cast<double>(it->second);
  };
  st.c.value[kUnderLoad] = phase("fill");
  st.c.value[kAfterShrink] = phase("shrink");
  st.c.value[kAfterIdle] = phase("idle");
  if (st.have_trim) {
    // Without a per-thread pass the global release is the whole trim.
    st.c.value[kTrimGlobal] = static_cast<double>(
        st.trim.per_thread() ? st.trim.rss_between_bytes() : st.trim.rss_after_bytes());
    if (st.trim.per_thread()) {
      st.c.value[kTrimPerThread] = static_cast<double>(st.trim.rss_after_bytes());
    }
  }
  st.c.value[kHwm] = static_cast<double>(st.hwm);
  if (st.c.base_rss > 0 && st.c.value[kTrimPerThread] >= 0) {
    st.c.trim_goal = st.c.value[kTrimPerThread] / (st.c.base_rss + kTrimGoalLiveCacheBytes);
  }
}

// The distinct allocator versions of a row's completed cells (all cells'
// when none completed): one, unless the row mixes runs of two versions.
std::string RowAllocator(const std::vector<const CellSummary*>& members) {
  bool any_ok = false;
  for (const CellSummary* c : members) any_ok |= c->ok;
  std::vector<std::string> seen;
  for (const CellSummary* c : members) {
    if ((c->ok || !any_ok) && !c->allocator_version.empty() &&
        std::find(seen.begin(), seen.end(), c->allocator_version) == seen.end()) {
      seen.push_back(c->allocator_version);
    }
  }
  return absl::StrJoin(seen, " / ");
}

// One table row: the medians and ranges of a (profile, threads) group's
// successful cells.
SweepRow RowOf(const std::string& profile, int threads,
               const std::vector<const CellSummary*>& members) {
  SweepRow row;
  row.profile = profile;
  row.threads = threads;
  row.cells = static_cast<int>(members.size());
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    std::vector<double> v;
    for (const CellSummary* c : members) {
      if (c->ok) v.push_back(c->value[m]);
    }
    row.metric[m] = AggregateValues(v);
  }
  std::vector<double> base, goal;
  for (const CellSummary* c : members) {
    if (!c->ok) continue;
    base.push_back(c->base_rss);
    goal.push_back(c->trim_goal);
  }
  row.base_rss = AggregateValues(base);
  row.trim_goal = AggregateValues(goal);
  row.allocator = RowAllocator(members);
  for (const CellSummary* c : members) {
    row.ok_cells += c->ok ? 1 : 0;
    row.unfilled_cells += c->ok && c->fill && !c->fill->filled() ? 1 : 0;
    row.fill_off_cells += c->ok && c->fill_off ? 1 : 0;
  }
  return row;
}

// Rows by profile (the matrix's order, then first seen) and threads.
void BuildRows(const std::vector<std::string>& profile_order, SweepSummary* s) {
  std::map<std::pair<int, int>, std::vector<const CellSummary*>> groups;
  for (const CellSummary& c : s->cells) {
    const int p = static_cast<int>(
        std::find(profile_order.begin(), profile_order.end(), c.profile) -
        profile_order.begin());
    groups[{p, c.threads}].push_back(&c);
  }
  for (const auto& [key, members] : groups) {
    s->rows.push_back(RowOf(profile_order[key.first], key.second, members));
  }
}

}  // namespace

struct SweepSummaryBuilder::State {
  SweepSummary s;
  std::vector<std::string> order;  // cells in the order first seen
  // Per cell, per attempt (Event.attempt, 0 read as 1): a cell re-queued on
  // another host or rerun by a batch system has several.
  std::map<std::string, Attempts> cells;
  std::vector<std::string> profile_order;
  std::vector<SweepCell> matrix;
};

SweepSummaryBuilder::SweepSummaryBuilder() : st_(std::make_unique<State>()) {}
SweepSummaryBuilder::~SweepSummaryBuilder() = default;

void SweepSummaryBuilder::Add(const Event& e) {
  SweepSummary& s = st_->s;
  std::vector<std::string>& order = st_->order;
  std::map<std::string, Attempts>& cells = st_->cells;
  std::vector<std::string>& profile_order = st_->profile_order;
  std::vector<SweepCell>& matrix = st_->matrix;
  if (e.has_header()) {
    s.scenario = e.header().scenario_name();
    s.agent = e.header().agent();
    s.matrix_id = e.header().matrix_id();
    for (const std::string& p : e.header().scenario().sweep().profiles()) {
      profile_order.push_back(p);
    }
    if (e.header().scenario().has_sweep()) matrix = ExpandCells(e.header().scenario().sweep());
    s.cells_total = static_cast<int>(matrix.size());
    return;
  }
  if (e.has_resumed()) {
    SupersedeUnfinished(&cells);
    return;
  }
  if (e.has_footer()) {
    s.has_footer = true;
    s.completed = e.footer().completed();
    s.error = e.footer().error();
    return;
  }
  if (e.cell().empty()) return;
  auto [per_cell, fresh_cell] = cells.try_emplace(e.cell());
  if (fresh_cell) order.push_back(e.cell());
  auto [it, fresh] = per_cell->second.try_emplace(std::max(1, e.attempt()));
  CellState& st = it->second;
  if (fresh) {
    st.c.cell = e.cell();
    st.c.profile = e.profile();
    st.c.threads = e.threads();
    st.c.repeat = e.repeat();
    st.c.index = e.has_cell_index() ? e.cell_index() : -1;
  }
  AddCellRecord(e, st);
}

SweepSummary SweepSummaryBuilder::Summary() const {
  // On a copy: more records may follow (merge adds its footer after).
  State copy = *st_;
  SweepSummary& s = copy.s;
  std::vector<std::string>& order = copy.order;
  std::map<std::string, Attempts>& cells = copy.cells;
  std::vector<std::string>& profile_order = copy.profile_order;
  const std::vector<SweepCell>& matrix = copy.matrix;
  for (const std::string& id : order) {
    CellState& st = CountedAttempt(id, cells[id], matrix, &s);
    FinishCellValues(st);
    if (!st.c.ok) ++s.failed_cells;
    s.cells.push_back(st.c);
    if (std::find(profile_order.begin(), profile_order.end(), st.c.profile) ==
        profile_order.end()) {
      profile_order.push_back(st.c.profile);
    }
  }
  OrderAndCount(matrix, order, &s);
  BuildRows(profile_order, &s);
  return s;
}

SweepSummary BuildSweepSummary(const std::vector<Event>& events) {
  SweepSummaryBuilder b;
  for (const Event& e : events) b.Add(e);
  return b.Summary();
}

std::string SweepCsv(const SweepSummary& s) {
  std::vector<std::string> cols = {"profile", "threads", "cells", "ok_cells"};
  for (const auto& m : kMetrics) {
    for (const char* suffix : {"median", "min", "max"}) {
      cols.push_back(absl::StrCat(m.key, "_", suffix));
    }
  }
  for (const char* c :
       {"unfilled_cells", "spread_over_20pct", "base_rss_mib_median", "trim_goal_median",
        "trim_goal_met", "allocator"}) {
    cols.push_back(c);
  }
  std::string out = absl::StrCat(absl::StrJoin(cols, ","), "\n");
  for (const SweepRow& r : s.rows) {
    std::vector<std::string> row = {r.profile, absl::StrCat(r.threads),
                                    absl::StrCat(r.cells), absl::StrCat(r.ok_cells)};
    for (int m = 0; m < kNumSweepMetrics; ++m) {
      const Aggregate& a = r.metric[m];
      for (double v : {a.median, a.min, a.max}) {
        row.push_back(a.n == 0 ? "-" : FormatMetric(m, v));
      }
    }
    row.push_back(absl::StrCat(r.unfilled_cells));
    row.push_back(SpreadCsv(r));
    row.push_back(r.base_rss.n == 0 ? "-" : FormatMetric(kUnderLoad, r.base_rss.median));
    row.push_back(r.trim_goal.n == 0 ? "-" : FormatGoalRatio(r.trim_goal.median));
    row.push_back(r.trim_goal.n == 0 ? "-" : TrimGoalMet(r.trim_goal) ? "yes" : "no");
    // Last, so readers that index the earlier columns are unchanged.
    row.push_back(r.allocator.empty() ? "-" : absl::StrReplaceAll(r.allocator, {{",", ";"}}));
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\n");
  }
  return out;
}

namespace {

// The title, where it ran, and whether it is complete.
std::string MarkdownHead(const SweepSummary& s, const std::string& run_dir) {
  std::string md = absl::StrFormat("# rsslab sweep: %s\n\n", s.scenario);
  absl::StrAppend(&md, "Run directory: `", run_dir, "`  \nAgent: `", s.agent,
                  "`  \nCells: ", s.cells.size(), ", failed: ", s.failed_cells,
                  "  \n");
  if (!s.matrix_id.empty()) absl::StrAppend(&md, "Matrix: `", s.matrix_id, "`  \n");
  if (!SweepComplete(s)) {
    absl::StrAppend(&md, "\n**", IncompleteLine(s), "**");
    if (!s.missing.empty()) {
      absl::StrAppend(&md, ": no record of cell(s) ", FormatCellSelection(s.missing),
                      " (run them with --cells=", FormatCellSelection(s.missing), ")");
    }
    md += "\n\n";
  }
  if (s.completed && !s.error.empty()) absl::StrAppend(&md, "Note: ", s.error, "  \n");
  if (s.completed && s.failed_cells == 0) {
    md += "Status: **completed** (every cell ran every step)\n\n";
  } else if (s.completed) {
    md += "Status: **completed with failed cells** (listed below; they are "
          "left out of the medians)\n\n";
  } else {
    absl::StrAppend(&md, "Status: **INCOMPLETE** — ",
                    s.has_footer ? s.error
                                 : "no footer record (the loadgen stopped "
                                   "without finishing)",
                    "\n\n");
  }
  return md;
}

// The medians table and what its columns and marks mean.
std::string MarkdownMedians(const SweepSummary& s) {
  std::string md;
  md += "## Medians per profile x threads (min-max over repeats)\n\n";
  md += "| profile | allocator | threads | cells ok | fill |";
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    absl::StrAppend(&md, " ", kMetrics[m].title, " |", m == kTrimPerThread ? " trim goal |" : "");
  }
  md += "\n|---|---|---|---|---|";
  for (int m = 0; m <= kNumSweepMetrics; ++m) md += "---|";
  md += "\n";
  int unfilled = 0;
  int marked = 0;
  for (const SweepRow& r : s.rows) {
    unfilled += r.unfilled_cells;
    absl::StrAppendFormat(&md, "| %s | %s | %d | %d/%d | %s |", r.profile,
                          r.allocator.empty() ? "-" : r.allocator, r.threads,
                          r.ok_cells, r.cells,
                          r.ok_cells == 0                 ? "-"
                          : r.fill_off_cells == r.ok_cells ? "off"
                          : r.unfilled_cells == 0         ? "yes"
                              : absl::StrFormat("**NEVER FILLED** (%d/%d)", r.unfilled_cells,
                                                r.ok_cells));
    for (int m = 0; m < kNumSweepMetrics; ++m) {
      absl::StrAppend(&md, " ", Cell(r.metric[m], m), " |");
      if (m == kTrimPerThread) absl::StrAppend(&md, " ", FormatTrimGoal(r.trim_goal), " |");
    }
    md += "\n";
    marked += static_cast<int>(WideSpreadMetrics(r).size());
  }
  md +=
      "\nRSS from the server's snapshot (after `gc.collect()`) at the end of "
      "each phase: under load = after fill (100 MiB cache), after shrink "
      "(10 MiB cache), after the idle wait; the trim phase releases free "
      "memory globally (e.g. `malloc_trim(0)`), then on every worker "
      "thread, and the two trim columns are RSS after each pass. QPS and "
      "p99 are the fill phase's. Failed cells are not in the medians. fill: "
      "whether every completed cell's fill reached the cache limit and "
      "evicted (- without completed cells).\n\n";
  absl::StrAppendFormat(
      &md,
      "%s after a memory figure (RSS, VmHWM): its repeats spread by more than %.0f %% "
      "of their median, (max - min) / median > %.2f, so this run cannot tell that cell's "
      "allocator from noise; rerun it with more repeats. %d figure(s) marked. QPS and "
      "p99 are not marked: on a shared machine they vary by tens of percent between "
      "repeats whatever the allocator (their min-max is shown).\n\n",
      kSpreadMark, kSpreadLimit * 100, kSpreadLimit, marked);
  absl::StrAppendFormat(
      &md,
      "trim goal: the median over repeats of RSS after the per-thread trim / (the same "
      "server's RSS before any load + %.0f MiB of live cache); met at <= %.2fx "
      "(docs/TRIM.md states the goal at 64 threads; it is shown at every thread count). "
      "\"Before any load\" is the RSS in the reply to the cell's fill set_phase.\n\n",
      kTrimGoalLiveCacheBytes / 1048576.0, kTrimGoalRatio);
  if (unfilled > 0) {
    absl::StrAppendFormat(&md,
                          "**%s** in %d cell(s) (fill column): their fill stored less "
                          "than the cache limit, so those rows are a smaller experiment "
                          "than seed 000's. Rerun them at a larger `--scale` "
                          "(docs/FILL.md).\n\n",
                          kCacheNeverFilled, unfilled);
  }
  return md;
}

// Every cell's own figures.
// A pre-fork service's cells: the master and each worker after idle.
std::string MarkdownServiceCells(const SweepSummary& s) {
  std::string md;
  for (const CellSummary& c : s.cells) {
    if (!c.has_service) continue;
    if (md.empty()) {
      md = "\n## Service processes after idle\n\nA pre-fork service's RSS in the tables "
           "above is its master's and workers' summed; PSS counts the pages they share "
           "once; QPS and p95 are the fill load's.\n\n| cell | qps | p95 ms | processes | rss "
           "MiB | pss MiB | master MiB | workers MiB |\n|---|---|---|---|---|---|---|---|\n";
    }
    const auto& m = c.service_idle;
    std::string master = "-";
    std::vector<std::string> workers;
    for (const auto& p : m.processes()) {
      const std::string rss = FormatMetric(kAfterIdle, static_cast<double>(p.rss_bytes()));
      if (p.role() == "master") {
        master = absl::StrCat(rss, " (pid ", p.pid(), ")");
      } else {
        workers.push_back(absl::StrCat(rss, " (pid ", p.pid(), ")"));
      }
    }
    absl::StrAppendFormat(&md, "| %s | %s | %s | %d | %s | %s | %s | %s |\n", Echo(c.cell),
                          FormatMetric(kQps, c.value[kQps]),
                          c.fill_p95_us < 0 ? "-" : FormatMetric(kP99, c.fill_p95_us),
                          m.processes_size(), FormatMetric(kAfterIdle, m.rss_bytes()),
                          m.pss_bytes() < 0 ? "-" : FormatMetric(kAfterIdle, m.pss_bytes()),
                          master, absl::StrJoin(workers, ", "));
  }
  return md;
}

std::string MarkdownCells(const SweepSummary& s) {
  std::string md;
  md += "## Cells\n\n| index | cell | ok | allocator | fill |";
  for (const auto& m : kMetrics) absl::StrAppend(&md, " ", m.title, " |");
  md += " base MiB | trim goal | attempt | where |\n|---|---|---|---|---|";
  for (int m = 0; m < kNumSweepMetrics; ++m) md += "---|";
  md += "---|---|---|---|\n";
  for (const CellSummary& c : s.cells) {
    absl::StrAppendFormat(&md, "| %s | %s | %s | %s |",
                          c.index < 0 ? "-" : absl::StrCat(c.index), Echo(c.cell),
                          c.ok                   ? "yes"
                          : c.died_before_stop   ? absl::StrCat("**", DiedMark(c), "**")
                          : c.has_result         ? "FAILED"
                                                 : "unfinished",
                          Echo(!c.allocator_version.empty() ? c.allocator_version
                               : c.allocator.empty()        ? "-"
                                                            : c.allocator));
    absl::StrAppend(&md, " ", FillCell(c.fill), " |");
    for (int m = 0; m < kNumSweepMetrics; ++m) {
      absl::StrAppend(&md, " ", FormatMetric(m, c.value[m]), " |");
    }
    absl::StrAppendFormat(&md, " %s | %s |", FormatMetric(kUnderLoad, c.base_rss),
                          c.trim_goal < 0 ? "-" : absl::StrCat(FormatGoalRatio(c.trim_goal), "x"));
    absl::StrAppendFormat(&md, " %d of %d | %s |\n", c.attempt, c.attempts,
                          c.where.empty() ? "-" : Echo(c.where));
  }
  return md + MarkdownServiceCells(s);
}

// A peer's error text on one line: its line breaks as " / ", the rest of
// its control bytes escaped.
std::string OneLine(const std::string& error) {
  return Echo(absl::StrReplaceAll(error, {{"\n", " / "}}), 1024);
}

// Attempts that do not count, and the failed cells with their log tails.
std::string MarkdownAttemptsAndFailures(const SweepSummary& s) {
  std::string md;
  if (!s.superseded.empty()) {
    md += "\n## Attempts that do not count\n\nA cell run more than once (re-queued after "
          "its host failed it, or rerun by a batch system): the latest successful attempt "
          "counts.\n\n";
    for (const SupersededAttempt& a : s.superseded) {
      absl::StrAppendFormat(&md, "- %s attempt %d: %s%s\n", Echo(a.cell), a.attempt,
                            a.ok ? "ok (a later one succeeded too)"
                                 : absl::StrCat("failed: ", OneLine(a.error)),
                            a.where.empty() ? "" : absl::StrCat(" (", Echo(a.where), ")"));
    }
  }
  if (s.failed_cells > 0) {
    md += "\n## Failed cells\n\n";
    for (const CellSummary& c : s.cells) {
      if (c.ok) continue;
      absl::StrAppendFormat(&md, "- **%s** (%s): %s\n", Echo(c.cell),
                            c.failed_at.empty() ? "did not finish" : Echo(c.failed_at),
                            OneLine(c.error));
      if (!c.exit.empty()) absl::StrAppend(&md, "  - server: ", Echo(c.exit), "\n");
      if (!c.log_tail.empty()) {
        std::vector<std::string> lines = absl::StrSplit(
            absl::StripSuffix(c.log_tail, "\n"), '\n');
        const size_t from = lines.size() > 5 ? lines.size() - 5 : 0;
        md += "  - log tail:\n\n    ```\n";
        for (size_t i = from; i < lines.size(); ++i) {
          absl::StrAppend(&md, "    ", Echo(lines[i], 512), "\n");
        }
        md += "    ```\n";
      }
    }
  }
  return md;
}

}  // namespace

std::string SweepMarkdown(const SweepSummary& s, const std::string& run_dir) {
  std::string md = MarkdownHead(s, run_dir);
  md += MarkdownMedians(s);
  md += MarkdownCells(s);
  md += MarkdownAttemptsAndFailures(s);
  absl::StrAppend(&md,
                  "\nPlots and the \"What to do\" section: `loadgen/results/plots_and_advice.py ",
                  run_dir, "`\n");
  return md;
}

absl::Status WriteSweepSummary(const std::string& run_dir, const SweepSummary& s) {
  if (absl::Status st =
          WriteFileAtomically(absl::StrCat(run_dir, "/summary.md"), SweepMarkdown(s, run_dir));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = WriteFileAtomically(absl::StrCat(run_dir, "/summary.csv"), SweepCsv(s));
      !st.ok()) {
    return st;
  }
  return WriteFileAtomically(absl::StrCat(run_dir, "/cells.json"), SweepJson(s));
}

std::string DiedMark(const CellSummary& c) {
  if (!c.died_before_stop) return "";
  return absl::StrFormat("died before stop after %d of %d steps", c.steps_done, c.steps_total);
}

bool SweepComplete(const SweepSummary& s) {
  if (s.cells_total == 0) return s.failed_cells == 0;  // an old header: no matrix to check
  return s.ok_cells == s.cells_total;
}

std::string IncompleteLine(const SweepSummary& s) {
  return absl::StrFormat("INCOMPLETE (%d of %d cells)", s.ok_cells,
                         s.cells_total > 0 ? s.cells_total : static_cast<int>(s.cells.size()));
}

std::string SweepTable(const SweepSummary& s) {
  std::vector<std::string> head = {"profile", "allocator", "threads", "ok", "fill"};
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    head.push_back(kMetrics[m].key);
    if (m == kTrimPerThread) head.push_back("trim_goal");
  }
  std::vector<std::vector<std::string>> rows = {head};
  int marked = 0;  // rows with a marked figure
  for (const SweepRow& r : s.rows) {
    std::vector<std::string> row = {
        r.profile, r.allocator.empty() ? "-" : r.allocator, absl::StrCat(r.threads),
        absl::StrCat(r.ok_cells, "/", r.cells),
        r.ok_cells == 0               ? "-"
        : r.fill_off_cells == r.ok_cells ? "off"
        : r.unfilled_cells == 0       ? "yes"
                                      : absl::StrCat("NEVER(", r.unfilled_cells, ")")};
    for (int m = 0; m < kNumSweepMetrics; ++m) {
      row.push_back(r.metric[m].n ? absl::StrCat(FormatMetric(m, r.metric[m].median),
                                                 SpreadMark(r.metric[m], m))
                                  : "-");
      if (m == kTrimPerThread) row.push_back(FormatTrimGoal(r.trim_goal));
    }
    rows.push_back(row);
    marked += !WideSpreadMetrics(r).empty();
  }
  std::vector<size_t> w(head.size(), 0);
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], DisplayWidth(r[c]));
  }
  std::string out;
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      absl::StrAppend(&out, c ? "  " : "", r[c], std::string(w[c] - DisplayWidth(r[c]), ' '));
    }
    out += "\n";
  }
  if (marked > 0) {
    absl::StrAppendFormat(&out,
                          "%s repeats spread by more than %.0f %% of the median ((max - min) / "
                          "median; %d row(s)): not to be trusted from this run\n",
                          kSpreadMark, kSpreadLimit * 100, marked);
  }
  if (!SweepComplete(s)) {
    absl::StrAppend(&out, IncompleteLine(s));
    if (!s.missing.empty()) absl::StrAppend(&out, "; no record of cell(s) ", FormatCellSelection(s.missing));
    if (s.failed_cells > 0) absl::StrAppend(&out, "; ", s.failed_cells, " failed");
    out += "\n";
  }
  for (const CellSummary& c : s.cells) {
    // Its figures are in summary.md's cells table, marked; never in a row.
    if (c.died_before_stop) {
      absl::StrAppend(&out, Echo(c.cell), ": ", DiedMark(c), " (server ", Echo(c.exit), ")\n");
    }
  }
  return out;
}

}  // namespace rsslab
