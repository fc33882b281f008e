// `rsslab_loadgen merge --out=DIR RUN_DIR...`: run directories of one
// matrix into one sweep (merge.h), its table printed, the plots made, and
// the cells still to run named in the syntax --cells and a Slurm array take.
//
//   int rc = rsslab::MergeMain({"cells/0", "cells/1"}, "results/merged");
#ifndef RSSLAB_LOADGEN_SWEEP_MERGE_MAIN_H_
#define RSSLAB_LOADGEN_SWEEP_MERGE_MAIN_H_

#include <string>
#include <vector>

namespace rsslab {

// 0 when every cell of the matrix succeeded, 1 while cells are missing or
// failed (or the merge failed), 2 for bad input (another matrix, no --out).
int MergeMain(const std::vector<std::string>& dirs, const std::string& out);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_MERGE_MAIN_H_
