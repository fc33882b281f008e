// loadgen/results/plots_and_advice.py (plots and the "What to do" section) run on a run
// directory at the end of a sweep or soak, and by `rsslab_loadgen report`.
//
//   std::string out;
//   absl::Status s = rsslab::RunReportTool(rsslab::FindReportTool(), dir, &out);
//   // FAILED_PRECONDITION without python3 + matplotlib: the message says
//   // the command to run later.
#ifndef RSSLAB_LOADGEN_RESULTS_REPORT_TOOL_H_
#define RSSLAB_LOADGEN_RESULTS_REPORT_TOOL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rsslab {

// loadgen/results/plots_and_advice.py (plots + "What to do"): where to find it next to this
// binary (bin/../tools, or the Bazel runfiles tree), "" if nowhere.
std::string FindReportTool();
// Runs `python3 TOOL RUN_DIR` when python3 and matplotlib are there;
// otherwise returns FAILED_PRECONDITION with the command to run later.
absl::Status RunReportTool(const std::string& tool, const std::string& run_dir,
                           std::string* output);
// The same with any arguments, e.g. {"--compare", JSON, "--png", PNG}.
absl::Status RunReportToolArgs(const std::string& tool, const std::vector<std::string>& args,
                               std::string* output);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_REPORT_TOOL_H_
