// A RunSummary rendered: summary.md, summary.csv, soak_cycles.csv, the
// terminal table and the soak's per-cycle lines.
//
//   rsslab::WriteSummary("results/run1", builder.summary());
//   printf("%s", rsslab::SummaryTable({builder.summary()}, {"results/run1"}).c_str());
#ifndef RSSLAB_LOADGEN_RESULTS_SUMMARY_RENDER_H_
#define RSSLAB_LOADGEN_RESULTS_SUMMARY_RENDER_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "loadgen/results/soak_analysis.h"
#include "loadgen/results/summary.h"

namespace rsslab {

// "cycle 3: post-idle rss 120.1 MiB (+1.2 vs prev, +3.4 vs first), ..."
std::string SoakCycleLine(const SoakCycle& c);
// For a terminal: the per-cycle lines, a count line and, when the server
// went away, when and what it looked like last.
std::string SoakText(const SoakSummary& k);

// The seed-000 table's columns, in order (CSV header and Markdown table).
std::vector<std::string> SummaryColumns();
// One row of values for SummaryColumns(); "-" where nothing was measured.
std::vector<std::string> SummaryRow(const RunSummary& s);
std::string SummaryMarkdown(const RunSummary& s, const std::string& run_dir);
std::string SummaryCsv(const RunSummary& s, const std::string& run_dir);
// A pre-fork service's memory by phase (--control=all:NAME): a row per
// phase and process (role master, worker, or total with pid 0); "" for a
// run of one process.
std::string ServiceCsv(const RunSummary& s);
// Writes run_dir/summary.md and run_dir/summary.csv.
// For a soak also run_dir/soak_cycles.csv (one row per cycle); for a
// service also run_dir/service.csv (ServiceCsv).
absl::Status WriteSummary(const std::string& run_dir, const RunSummary& s);
std::string SoakCyclesCsv(const SoakSummary& s);
// "web_worker.py dict_items=200 dict_shape=flat ...": the handler's file
// name and its knobs, or "-" when no snapshot said.
std::string HandlerLabel(const RunSummary& s);
// A short fixed-width table for a terminal, with a warning under it when
// the runs did not all use the same handler with the same knobs (their
// figures are then not comparable: e.g. web_worker's dict_shape=flat vs
// nested).
std::string SummaryTable(const std::vector<RunSummary>& runs,
                         const std::vector<std::string>& labels);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_SUMMARY_RENDER_H_
