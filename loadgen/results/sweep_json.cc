// cells.json (proto/sweep_table.proto): the sweep summary as data, for
// loadgen/results/plots_and_advice.py and anything else that reads a sweep's aggregate.
#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "loadgen/results/fill_check.h"
#include "loadgen/results/sweep_summary.h"

namespace rsslab {
namespace {

const char* UnitOf(int metric) {
  switch (metric) {
    case kQps:
      return "requests/s";
    case kP99:
      return "us";
    default:
      return "bytes";
  }
}

v1::SweepFigure FigureOf(const Aggregate& a, int metric) {
  v1::SweepFigure f;
  f.set_n(a.n);
  f.set_median(a.median);
  f.set_min(a.min);
  f.set_max(a.max);
  f.set_wide_spread(metric >= 0 && IsMemoryMetric(metric) && SpreadTooWide(a));
  if (metric >= 0) f.set_text(a.n == 0 ? "-" : FormatMetric(metric, a.median));
  return f;
}

v1::SweepTableRow RowOf(const SweepRow& r) {
  v1::SweepTableRow out;
  out.set_profile(r.profile);
  out.set_allocator(r.allocator);
  out.set_threads(r.threads);
  out.set_cells(r.cells);
  out.set_ok_cells(r.ok_cells);
  out.set_unfilled_cells(r.unfilled_cells);
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    (*out.mutable_figures())[MetricInfo(m).key] = FigureOf(r.metric[m], m);
  }
  *out.mutable_base_rss() = FigureOf(r.base_rss, kUnderLoad);
  *out.mutable_trim_goal() = FigureOf(r.trim_goal, -1);
  out.set_trim_goal_met(TrimGoalMet(r.trim_goal));
  out.set_trim_goal_text(FormatTrimGoal(r.trim_goal));
  if (r.trim_goal.n > 0) out.set_trim_goal_ratio(FormatGoalRatio(r.trim_goal.median));
  out.set_spread_judged(SpreadJudged(r));
  return out;
}

v1::SweepTableCell CellOf(const CellSummary& c) {
  v1::SweepTableCell out;
  out.set_index(c.index);
  out.set_cell(c.cell);
  out.set_profile(c.profile);
  out.set_threads(c.threads);
  out.set_repeat(c.repeat);
  out.set_status(c.ok ? "ok" : c.has_result ? "failed" : "unfinished");
  out.set_failed_at(c.failed_at);
  out.set_error(c.error);
  out.set_exit(c.exit);
  out.set_allocator(c.allocator);
  out.set_allocator_version(c.allocator_version);
  out.set_attempt(c.attempt);
  out.set_attempts(c.attempts);
  out.set_where(c.where);
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    if (c.value[m] >= 0) (*out.mutable_figures())[MetricInfo(m).key] = c.value[m];
  }
  out.set_base_rss_bytes(c.base_rss);
  out.set_trim_goal(c.trim_goal);
  if (c.fill) *out.mutable_fill() = *c.fill;
  out.set_fill_p50_us(c.fill_p50_us);
  out.set_max_threads(c.max_threads);
  out.set_max_arenas(c.max_arenas);
  out.set_lost(DiedMark(c));
  return out;
}

}  // namespace

v1::SweepTable SweepTableOf(const SweepSummary& s) {
  v1::SweepTable t;
  t.set_scenario(s.scenario);
  t.set_agent(s.agent);
  t.set_matrix_id(s.matrix_id);
  t.set_completed(s.completed);
  t.set_error(s.error);
  t.set_cells_total(s.cells_total);
  t.set_ok_cells(s.ok_cells);
  t.set_failed_cells(s.failed_cells);
  for (int i : s.missing) t.add_missing(i);
  t.set_complete(SweepComplete(s));
  if (!t.complete()) t.set_incomplete_line(IncompleteLine(s));
  for (int m = 0; m < kNumSweepMetrics; ++m) {
    v1::SweepMetricDef* d = t.add_metrics();
    d->set_key(MetricInfo(m).key);
    d->set_title(MetricInfo(m).title);
    d->set_unit(UnitOf(m));
    d->set_memory(IsMemoryMetric(m));
  }
  t.set_spread_limit(kSpreadLimit);
  t.set_spread_mark(kSpreadMark);
  t.set_trim_goal_ratio(kTrimGoalRatio);
  t.set_trim_goal_live_cache_bytes(kTrimGoalLiveCacheBytes);
  t.set_cache_never_filled(kCacheNeverFilled);
  for (const SweepRow& r : s.rows) *t.add_rows() = RowOf(r);
  for (const CellSummary& c : s.cells) *t.add_cells() = CellOf(c);
  return t;
}

std::string SweepJson(const SweepSummary& s) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;  // readers see 0 and false, not a missing key
  o.add_whitespace = true;
  std::string out;
  // Printing a well-formed message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(SweepTableOf(s), &out, o);
  return out;
}

}  // namespace rsslab
