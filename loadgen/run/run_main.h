// `rsslab_loadgen [run]`: a scenario, or a sweep of them, against a server
// (flags in loadgen/run_flags.cc and loadgen/sweep/sweep_flags.cc).
//
//   rsslab_loadgen --builtin=seed --scale=0.1 --target=HOST:PORT --control=HOST:PORT
//   rsslab_loadgen --scenario=my.txtpb
//   rsslab_loadgen --requests=100000 --concurrency=64 --channels=4   (one load step)
//   rsslab_loadgen --rate=2000 --arrival=poisson --duration=30s      (open loop)
//   rsslab_loadgen --builtin=soak --duration=4h   (cycles + watch stream)
//   rsslab_loadgen --builtin=sweep --agent=HOST:PORT [--profiles=glibc,jemalloc]
//       [--threads_list=1,4] [--repeats=N] [--scale=0.1]   (seed 000's matrix)
//   rsslab_loadgen ... the same sweep command ... --out=DIR --resume
//       (continue a sweep that was killed: only the cells not yet done run)
//   rsslab_loadgen --builtin=sweep --agent=A:50060,B:50060   (one cell per agent at a time)
//   rsslab_loadgen ... sweep ... --print_cells [--json]   (the numbered cells, matrix id)
//   rsslab_loadgen ... sweep ... --cells=3,7-9 --local [--server_cpus=0 --loadgen_cpus=1]
//       [--results_dir=DIR]   (cells launched here, no agent: a batch task's command)
//
// The steps, each in its own file here: invocation (the command line,
// checked), run_dir (the metrics port, the run directory), hosts (a sweep's
// agents or --local), execute (the plan or the sweep), finish (footer,
// summary, exit status).
#ifndef RSSLAB_LOADGEN_RUN_RUN_MAIN_H_
#define RSSLAB_LOADGEN_RUN_RUN_MAIN_H_

#include <signal.h>

namespace rsslab {

// After absl's flag parsing; `sigs` (SIGINT, SIGTERM) blocked by main before
// any thread existed. Returns the exit status: 0 every step succeeded, 1 a
// step or the run failed, 2 bad input (nothing was sent), 130 interrupted.
int RunMain(int argc, char** argv, const sigset_t& sigs);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_RUN_MAIN_H_
