// `rsslab_loadgen report RUN_DIR...`: every summary rebuilt from each run
// directory's events.jsonl (a sweep's table, a soak's cycles, a run's
// summary), then loadgen/results/plots_and_advice.py for the plots and "What to do". Its flag,
// --report_tool, is defined here; sweeps, merge and compare use it too.
//
//   int rc = rsslab::ReportMain({"results/run-1", "results/run-2"});
//   rsslab::PlotAndAdvise("results/sweep-1");   // after a sweep or a merge
#ifndef RSSLAB_LOADGEN_RESULTS_REPORT_MAIN_H_
#define RSSLAB_LOADGEN_RESULTS_REPORT_MAIN_H_

#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/status/status.h"

ABSL_DECLARE_FLAG(std::string, report_tool);

namespace rsslab {

// The summaries of each directory rewritten and printed; the first
// directory that cannot be read or written is the error.
absl::Status Report(const std::vector<std::string>& dirs);
// Report, its status as an exit code (2 without a directory).
int ReportMain(const std::vector<std::string>& dirs);

// Plots and the "What to do" section for DIR (loadgen/results/plots_and_advice.py, --report_tool
// or found beside this binary), when python3 + matplotlib are here; its
// output and any failure on stderr (never fatal: the tables are written).
void PlotAndAdvise(const std::string& dir);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_REPORT_MAIN_H_
