// The `compare` subcommand of rsslab_loadgen (flags in compare_main.cc).
#ifndef RSSLAB_LOADGEN_RESULTS_COMPARE_MAIN_H_
#define RSSLAB_LOADGEN_RESULTS_COMPARE_MAIN_H_

#include <string>
#include <vector>

namespace rsslab {

// `rsslab_loadgen compare BASE[@NAME] NEW[@NAME] [--fail_if=...]... [--format=text|md]
// [--json] [--force] [--alpha=0.05] [--plot=PNG]`. `dirs` are the
// arguments after "compare"; `argv` the whole command line (every --fail_if
// occurrence counts, where a flag would keep only the last). Returns the
// exit status: 0 no threshold crossed, 1 one crossed, 2 bad input or pairs
// that are not comparable (without --force).
int CompareMain(const std::vector<std::string>& dirs, const std::vector<std::string>& argv);

struct CompareResult;

// The base-vs-new plot of `r` (loadgen/results/plots_and_advice.py --compare, matplotlib) into
// `png`; false, after one line on stderr, when none was written.
bool PlotCompare(const CompareResult& r, const std::string& png);

// Where the plot goes without --plot: beside the file `fd` (stdout) writes
// the table to, DIR/NAME.md -> DIR/NAME.png. "" and *why when `fd` is not
// a file with a path (a terminal, a pipe) or is itself a .png.
std::string PlotBeside(int fd, std::string* why);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_COMPARE_MAIN_H_
