#include "loadgen/sweep/merge_main.h"

#include <algorithm>
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "loadgen/results/cells.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/results/report_main.h"
#include "loadgen/results/sweep_summary.h"
#include "loadgen/sweep/merge.h"

ABSL_FLAG(bool, union_profiles, false,
          "merge: inputs whose matrices differ only in their profiles become one matrix of "
          "every profile (the first input's order, then each new one).");

namespace rsslab {

int MergeMain(const std::vector<std::string>& dirs, const std::string& out) {
  if (dirs.empty()) {
    return cli::Fail(cli::kExitUsage, "merge needs run directories: merge --out=DIR RUN_DIR...");
  }
  if (out.empty()) return cli::Fail(cli::kExitUsage, "merge needs --out=DIR");
  MergeResult r;
  MergeOptions options;
  options.union_profiles = absl::GetFlag(FLAGS_union_profiles);
  if (absl::Status s = MergeRunDirs(dirs, out, options, &r); !s.ok()) {
    return cli::Fail(cli::ExitCodeOf(s), s.message());
  }
  for (const std::string& n : r.notes) fprintf(stderr, "rsslab_loadgen: merge: %s\n", n.c_str());
  printf("%s", SweepTable(r.summary).c_str());
  fflush(stdout);
  PlotAndAdvise(out);
  printf("merge: %zu run directories, %d attempts (%d without a result), %d of %d cells ok%s\n"
         "run directory: %s (events.jsonl, summary.md, summary.csv, cells.json)\n",
         r.run_dirs.size(), r.attempts, r.unfinished_attempts, r.summary.ok_cells,
         r.summary.cells_total,
         r.summary.missing.empty()
             ? ""
             : absl::StrCat("; missing cells ", FormatCellSelection(r.summary.missing))
                   .c_str(),
         out.c_str());
  if (SweepComplete(r.summary)) return 0;
  // Missing and failed cells, in the syntax both --cells and a Slurm array take.
  std::vector<int> again = r.summary.missing;
  for (const CellSummary& c : r.summary.cells) {
    if (!c.ok && c.index >= 0) again.push_back(c.index);
  }
  std::sort(again.begin(), again.end());
  const std::string list = FormatCellSelection(again);
  printf("merge: cells to run again: %s (--cells=%s, or sbatch --array=%s "
         "deploy/slurm/sweep.sbatch), then merge again\n",
         list.c_str(), list.c_str(), list.c_str());
  return cli::kExitFailed;
}

}  // namespace rsslab
