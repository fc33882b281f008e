// A sweep's summary (seed 000's table): per profile x threads, the median
// and min-max over repeats of RSS under load, after shrink, after idle,
// after the global trim, after the per-thread trim, VmHWM, and each cell's
// fill-phase QPS and p99; the memory measures whose repeats spread too far
// to trust (kSpreadLimit), and the trim goal (kTrimGoalRatio). Built
// from events.jsonl alone, so `rsslab_loadgen report RUN_DIR` and
// loadgen/results/plots_and_advice.py rebuild it exactly.
//
//   int skipped = 0;
//   auto events = rsslab::ReadEvents(run_dir, &skipped);
//   if (rsslab::IsSweepRun(*events)) {
//     rsslab::SweepSummary s = rsslab::BuildSweepSummary(*events);
//     rsslab::WriteSweepSummary(run_dir, s);   // summary.md, summary.csv, cells.json
//     printf("%s", rsslab::SweepTable(s).c_str());
//   }
//
// Only cells that completed count towards the medians: a cell whose server
// crashed measured a different process and is listed apart, with its exit
// status and log tail; one whose program died before the stop shows what
// it measured, marked "died before stop after N of M steps" (DiedMark).
#ifndef RSSLAB_LOADGEN_RESULTS_SWEEP_SUMMARY_H_
#define RSSLAB_LOADGEN_RESULTS_SWEEP_SUMMARY_H_

#include <cstdint>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadgen/results/cells.h"
#include "proto/results.pb.h"
#include "proto/sweep_table.pb.h"

namespace rsslab {

// The summary's per-cell measures, in column order.
enum SweepMetric {
  kUnderLoad = 0,   // RSS after the fill phase (cache full, 100 MiB live)
  kAfterShrink,     // RSS after the shrink phase's load
  kAfterIdle,       // RSS after the idle wait
  kTrimGlobal,      // RSS after the global release (TrimResult between)
  kTrimPerThread,   // RSS after the per-thread pass too (TrimResult after)
  kHwm,             // largest VmHWM seen
  kQps,             // fill load step's QPS
  kP99,             // fill load step's p99 latency, microseconds
  kNumSweepMetrics
};

struct SweepMetricInfo {
  const char* key;    // CSV column stem, e.g. "under_load_mib"
  const char* title;  // Markdown header
};
const SweepMetricInfo& MetricInfo(int metric);
// The value in display units (MiB, QPS, ms), formatted as in the tables.
std::string FormatMetric(int metric, double raw);
// RSS and VmHWM: the measures the spread marking applies to. QPS and p99
// are not marked: on a shared machine they vary by tens of percent between
// repeats whatever the allocator, and the advice already treats throughput
// whose min-max ranges overlap as no difference.
bool IsMemoryMetric(int metric);

// A memory measure whose repeats spread by more than this fraction of their
// median, (max - min) / median, is marked in the table and named in "What to
// do": one run of that cell cannot tell the allocator from noise.
inline constexpr double kSpreadLimit = 0.20;
// The marker after such a value in the tables.
inline constexpr char kSpreadMark[] = "\u2020";  // a dagger

// The trim goal: RSS after the per-thread trim <= kTrimGoalRatio x (the
// same server's RSS before any load + kTrimGoalLiveCacheBytes of live
// cache). "Before any load" is the RSS in the reply to the cell's first
// set_phase (fill), before its first load step.
inline constexpr double kTrimGoalRatio = 1.25;
inline constexpr double kTrimGoalLiveCacheBytes = 10 * 1048576.0;

// One sweep cell as the events tell it; -1 for a measure that is missing.
struct CellSummary {
  std::string cell;
  std::string profile;
  int threads = 0;
  int repeat = 0;
  bool has_result = false;  // a cell_result record was seen
  bool ok = false;
  std::string failed_at;
  std::string error;
  std::string exit;
  std::string log_tail;
  // The program ended before the sweep stopped it, after steps_done of
  // steps_total top-level steps: the cell is lost, its figures are those
  // measured before (shown, marked, never in the medians).
  bool died_before_stop = false;
  int steps_done = 0;
  int steps_total = 0;
  std::string allocator;
  // The allocator and its version as the cell's snapshots recorded them
  // ("mimalloc 3.0.1", "jemalloc 5.3.0"; memory/alloc/version.h), else as
  // its mapped library names it; "" when nothing said.
  std::string allocator_version;
  int index = -1;     // in the matrix's cell list; -1: unknown
  int attempt = 1;    // the attempt these figures come from
  int attempts = 1;   // attempts recorded
  std::string where;  // host, CPUs, memory, pinning (WhereText)
  // Did the cell's fill reach the cache limit (loadgen/results/fill_check.h)?
  std::optional<rsslab::v1::FillCheck> fill;
  // It had a fill phase, but no snapshot of it carried a cache limit (a
  // service with no cache, or read from /proc): the check is off.
  bool fill_off = false;
  double value[kNumSweepMetrics];
  // RSS in the reply to the fill set_phase, before any load; -1: not seen.
  double base_rss = -1;
  // value[kTrimPerThread] / (base_rss + kTrimGoalLiveCacheBytes); -1 when
  // either is missing.
  double trim_goal = -1;
  // Not in the table; `rsslab_loadgen compare` reads them: the fill load's
  // p50 (us) and the largest OS thread and glibc arena counts seen.
  double fill_p50_us = -1;
  int max_threads = -1;
  int max_arenas = -1;
  // A pre-fork service's cell (--control=all:NAME): its master and workers
  // after the idle phase (the table's RSS is their sum).
  bool has_service = false;
  rsslab::v1::ServiceMemory service_idle;
  // The fill load's p95 (us, from its histogram; seed 004's figure); -1: none.
  double fill_p95_us = -1;
  CellSummary() {
    for (double& v : value) v = -1;
  }
};

// Median and range of one measure over a row's completed cells.
struct Aggregate {
  int n = 0;  // values that went in; 0: nothing measured
  double median = 0;
  double min = 0;
  double max = 0;
};
// Ignores negative (missing) values; the median of an even count is the
// mean of the middle two.
Aggregate AggregateValues(std::vector<double> values);
// Whether a has at least 2 values and (max - min) / median > kSpreadLimit.
bool SpreadTooWide(const Aggregate& a);

struct SweepRow {
  std::string profile;
  // The completed cells' allocator_version (all cells' when none
  // completed), distinct values joined by " / "; "" when none recorded one.
  std::string allocator;
  int threads = 0;
  int cells = 0;
  int ok_cells = 0;
  // Completed cells whose fill never reached the cache limit: the row does
  // not show seed 000's conditions.
  int unfilled_cells = 0;
  // Completed cells whose fill check was off (CellSummary::fill_off).
  int fill_off_cells = 0;
  Aggregate metric[kNumSweepMetrics];
  // Over the completed cells' base_rss and trim_goal.
  Aggregate base_rss;
  Aggregate trim_goal;
};

// The row's memory measures whose repeats spread by more than kSpreadLimit,
// in column order.
std::vector<int> WideSpreadMetrics(const SweepRow& r);
// Whether any memory measure of the row has 2 or more repeats to judge.
bool SpreadJudged(const SweepRow& r);
// Whether the row's median trim_goal is within kTrimGoalRatio (n > 0).
bool TrimGoalMet(const Aggregate& goal);
// The ratio with 2 decimals, or up to 4 when 2 would print the limit itself
// for a ratio on the other side of it ("1.251", not "1.25" and missed).
std::string FormatGoalRatio(double ratio);
// "1.57x missed", "1.18x met"; "-" without a value.
std::string FormatTrimGoal(const Aggregate& goal);

// An attempt at a cell that does not count: a later one succeeded, or it
// failed before a later attempt.
struct SupersededAttempt {
  std::string cell;
  int attempt = 0;
  bool ok = false;
  std::string error;
  std::string where;
};

struct SweepSummary {
  std::string scenario;
  std::string agent;
  std::string matrix_id;
  int cells_total = 0;            // cells in the matrix (0: unknown, old header)
  int ok_cells = 0;               // cells whose counted attempt succeeded
  std::vector<int> missing;       // matrix cells with no record at all
  std::vector<SupersededAttempt> superseded;
  bool has_footer = false;
  bool completed = false;
  std::string error;
  std::vector<CellSummary> cells;  // in matrix order (cells.h), as --print_cells lists them
  std::vector<SweepRow> rows;      // profiles in matrix order, threads rising
  int failed_cells = 0;
};

// Whether the records come from a sweep (the header's scenario has one, or
// a record is tagged with a cell).
bool IsSweepRun(const std::vector<rsslab::v1::Event>& events);
SweepSummary BuildSweepSummary(const std::vector<rsslab::v1::Event>& events);

// The same, one record at a time (merge streams its inputs through it), so
// only per-cell figures are held, never the records.
class SweepSummaryBuilder {
 public:
  SweepSummaryBuilder();
  ~SweepSummaryBuilder();
  SweepSummaryBuilder(const SweepSummaryBuilder&) = delete;
  SweepSummaryBuilder& operator=(const SweepSummaryBuilder&) = delete;
  void Add(const rsslab::v1::Event& e);
  // The summary of the records so far; more may be added after.
  SweepSummary Summary() const;

 private:
  struct State;
  std::unique_ptr<State> st_;
};

std::string SweepMarkdown(const SweepSummary& s, const std::string& run_dir);
std::string SweepCsv(const SweepSummary& s);
// The summary as data (proto/sweep_table.proto): head, rows and every cell
// with every figure in raw units, the marks and the goal as the tables show
// them; SweepJson is its JSON form, cells.json (loadgen/results/sweep_json.cc).
rsslab::v1::SweepTable SweepTableOf(const SweepSummary& s);
std::string SweepJson(const SweepSummary& s);
// Writes run_dir/summary.md, run_dir/summary.csv and run_dir/cells.json.
absl::Status WriteSweepSummary(const std::string& run_dir, const SweepSummary& s);
// Whether every cell of the matrix has a successful attempt; the line the
// tables carry otherwise: "INCOMPLETE (n of N cells)".
bool SweepComplete(const SweepSummary& s);
std::string IncompleteLine(const SweepSummary& s);
// "died before stop after 3 of 7 steps" for such a cell, else "".
std::string DiedMark(const CellSummary& c);

// The rows as a fixed-width terminal table.
std::string SweepTable(const SweepSummary& s);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_SWEEP_SUMMARY_H_
