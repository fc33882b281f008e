// The `compare` subcommand of rsslab_loadgen (flags in compare_main.cc).
#ifndef RSSLAB_LOADGEN_RESULTS_COMPARE_MAIN_H_
#define RSSLAB_LOADGEN_RESULTS_COMPARE_MAIN_H_

#include <string>
#include <vector>

namespace rsslab {

// `rsslab_loadgen compare BASE[@NAME] NEW[@NAME] [--fail_if=...]... [--format=text|md]
// [--json] [--force] [--alpha=0.05] [--plot=compare.png]`. `dirs` are the
// arguments after "compare"; `argv` the whole command line (every --fail_if
// occurrence counts, where a flag would keep only the last). Returns the
// exit status: 0 no threshold crossed, 1 one crossed, 2 bad input or pairs
// that are not comparable (without --force).
int CompareMain(const std::vector<std::string>& dirs, const std::vector<std::string>& argv);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_COMPARE_MAIN_H_
