// Finishing a run: one footer record, the summary (a sweep's table built
// from events.jsonl exactly as `report` builds it, or the run's), the final
// metrics held for --metrics_hold, and the exit status.
//
//   return rsslab::run::Finish(inv, outcome, &dir, &metrics, stop);
#ifndef RSSLAB_LOADGEN_RUN_FINISH_H_
#define RSSLAB_LOADGEN_RUN_FINISH_H_

#include "loadgen/engine.h"
#include "loadgen/run/execute.h"
#include "loadgen/run/invocation.h"
#include "loadgen/run/run_dir.h"

namespace rsslab {
namespace run {

// The exit status: 0 every step (every cell) succeeded, 1 a step, a cell or
// writing the records failed, 2 a sweep naming a profile its agent lacks,
// 130 interrupted.
int Finish(const Invocation& inv, const Outcome& o, RunDir* dir, Metrics* metrics,
           const rsslab::StopFlag& stop);

}  // namespace run
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_FINISH_H_
