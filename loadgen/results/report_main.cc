#include "loadgen/results/report_main.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/untrusted_text.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/report_tool.h"
#include "loadgen/results/summary.h"
#include "loadgen/results/summary_render.h"
#include "loadgen/results/sweep_summary.h"

ABSL_FLAG(std::string, report_tool, "",
          "Sweeps: loadgen/results/plots_and_advice.py to run at the end (default: found next to this binary).");

namespace rsslab {
namespace {

// A sweep directory: its table rewritten and printed, then the plots.
absl::Status ReportSweep(const std::string& d, const std::vector<v1::Event>& events) {
  SweepSummary sw = BuildSweepSummary(events);
  if (absl::Status s = WriteSweepSummary(d, sw); !s.ok()) return s;
  printf("%s: sweep, %zu cells, %d failed\n%s", d.c_str(), sw.cells.size(), sw.failed_cells,
         SweepTable(sw).c_str());
  PlotAndAdvise(d);
  return absl::OkStatus();
}

}  // namespace

void PlotAndAdvise(const std::string& dir) {
  std::string tool = absl::GetFlag(FLAGS_report_tool);
  if (tool.empty()) tool = FindReportTool();
  std::string output;
  absl::Status s = RunReportTool(tool, dir, &output);
  if (!output.empty()) fprintf(stderr, "%s", EchoMultiline(output, 4096).c_str());
  if (!s.ok()) fprintf(stderr, "rsslab_loadgen: %s\n", Echo(s.message(), 1024).c_str());
}

absl::Status Report(const std::vector<std::string>& dirs) {
  std::vector<RunSummary> runs;
  std::vector<std::string> run_dirs;
  for (const std::string& d : dirs) {
    int skipped = 0;
    auto events = ReadEvents(d, &skipped);
    if (!events.ok()) return events.status();
    if (skipped > 0) {
      fprintf(stderr, "rsslab_loadgen: %s: skipped %d unreadable line(s)\n", d.c_str(), skipped);
    }
    if (IsSweepRun(*events)) {
      if (absl::Status s = ReportSweep(d, *events); !s.ok()) return s;
      continue;
    }
    SummaryBuilder b;
    for (const auto& e : *events) b.Add(e);
    if (absl::Status s = WriteSummary(d, b.summary()); !s.ok()) return s;
    if (b.summary().soak.enabled) {
      printf("%s", SoakText(b.summary().soak).c_str());
      fflush(stdout);
      PlotAndAdvise(d);  // rss_over_time.png, post_idle_per_cycle.png
    }
    runs.push_back(b.summary());
    run_dirs.push_back(d);
  }
  if (!runs.empty()) printf("%s", SummaryTable(runs, run_dirs).c_str());
  return absl::OkStatus();
}

int ReportMain(const std::vector<std::string>& dirs) {
  if (dirs.empty()) return cli::Fail(cli::kExitUsage, "report needs a run directory");
  const absl::Status s = Report(dirs);
  // Every failure here is reading or writing a directory: exit 1, as before.
  return s.ok() ? cli::kExitOk : cli::Fail(cli::kExitFailed, s.message());
}

}  // namespace rsslab
