// Executing a run: the plan once against --target/--control, or once per
// cell of a sweep on its hosts; and the signal thread that asks it to stop.
//
//   rsslab::StopFlag stop;
//   rsslab::run::StopOnSignals(sigs, &stop);
//   rsslab::run::Outcome o = rsslab::run::Execute(inv, &dir, &metrics, std::move(hosts), &stop);
#ifndef RSSLAB_LOADGEN_RUN_EXECUTE_H_
#define RSSLAB_LOADGEN_RUN_EXECUTE_H_

#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "loadgen/engine.h"
#include "loadgen/run/invocation.h"
#include "loadgen/run/run_dir.h"
#include "loadgen/sweep/cell_host.h"

namespace rsslab {
namespace run {

struct Outcome {
  bool sweep = false;
  absl::Time start;
  // Why the run or the sweep could not finish (a failed step, an unreachable
  // agent, CANCELLED when interrupted); cell failures are counted below.
  absl::Status status;
  bool interrupted = false;
  int cells = 0;         // sweep: cells run now
  int failed_cells = 0;  // sweep: of which failed
  int hosts = 0;         // sweep: agents (or 1, --local)
  int requeued = 0;      // sweep: attempts lost to their host and run again
  double busy_seconds = 0;  // sweep: every attempt's length, summed
  std::vector<std::string> lost_hosts;
};

// SIGINT/SIGTERM are blocked before any thread exists (gRPC makes some); this
// thread takes them with sigwait and asks the run to stop, a second one
// exits at once (130).
void StopOnSignals(const sigset_t& sigs, rsslab::StopFlag* stop);

// The plan, or the sweep over `hosts`, its records into dir->log.
Outcome Execute(const Invocation& inv, RunDir* dir, Metrics* metrics,
                std::vector<std::unique_ptr<rsslab::CellHost>> hosts,
                const rsslab::StopFlag* stop);

}  // namespace run
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_EXECUTE_H_
