// The gate's Markdown report, for a pull-request comment: the verdict, per
// gated figure the medians, the Hodges-Lehmann shift with its interval, the
// floor and the verdict, the repeats, the fingerprint, and a text strip
// plot of every run (a code block: it renders anywhere Markdown does).
//
//   rsslab::gate::ReportInfo info;
//   info.verdict = "regression"; info.stopped = "every gated figure's verdict is clear";
//   std::string md = rsslab::gate::GateMarkdown(result, info);
#ifndef RSSLAB_LOADGEN_GATE_GATE_REPORT_H_
#define RSSLAB_LOADGEN_GATE_GATE_REPORT_H_

#include <string>
#include <vector>

#include "loadgen/results/compare.h"

namespace rsslab {
namespace gate {

struct ReportInfo {
  std::string verdict;          // "pass", "regression", "can't tell", ...
  std::string base, head;       // what each side ran, one line each
  std::string stopped;          // why the runs stopped
  std::string out;              // the gate's directory
  double elapsed_s = 0;
  int exit_code = 0;
  std::string png;              // compare's plot of every run, if one was written
};

std::string GateMarkdown(const CompareResult& r, const ReportInfo& info);

// One figure's runs on a shared axis, `width` columns: a row per side,
// `o` (base) or `x` (head) per run, a digit where several fall in one
// column, `|` at each side's median; the axis's ends below.
std::string StripPlot(const std::vector<double>& base, const std::vector<double>& head,
                      const char* unit, int width = 48);

}  // namespace gate
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_GATE_GATE_REPORT_H_
