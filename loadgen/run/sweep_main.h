// `rsslab_loadgen sweep ...`: the same as `rsslab_loadgen --builtin=sweep ...`
// (the spelling scripts and deploy files use).
//
//   if (sub == "sweep" && rest.empty()) return rsslab::SweepMain(argc, argv, sigs);
#ifndef RSSLAB_LOADGEN_RUN_SWEEP_MAIN_H_
#define RSSLAB_LOADGEN_RUN_SWEEP_MAIN_H_

#include <signal.h>

namespace rsslab {

// RunMain with --builtin=sweep; another --builtin is a usage error (2).
int SweepMain(int argc, char** argv, const sigset_t& sigs);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_SWEEP_MAIN_H_
