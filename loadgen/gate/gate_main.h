// `rsslab_loadgen gate`: base against head, interleaved, until the verdicts
// are clear. Each run is a fresh `rsslab_loadgen --local` process (base,
// head, base, head, ...) writing its own run directory under OUT/base and
// OUT/head; after every pair compare's verdicts (loadgen/results/compare.h)
// are taken over all runs so far.
//
//   rsslab_loadgen gate --service='/usr/bin/python3 svc.py --port={port} --threads={threads}'
//       --head_env=MALLOC_ARENA_MAX=2 --scale=0.05 --wait=2s --report_md=gate.md   (one line)
//
// Exit status: 0 pass (every gated figure "no change" or "improvement"), 1
// regression, 2 usage error, fingerprints that differ, or a side that failed
// to run, 3 can't tell (too few runs by --max_repeats or --time_budget), 130
// interrupted. The runs already recorded stay.
#ifndef RSSLAB_LOADGEN_GATE_GATE_MAIN_H_
#define RSSLAB_LOADGEN_GATE_GATE_MAIN_H_

#include <signal.h>

namespace rsslab {

// After absl's flag parsing; `sigs` (SIGINT, SIGTERM) blocked by main.
int GateMain(int argc, char** argv, const sigset_t& sigs);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_GATE_GATE_MAIN_H_
