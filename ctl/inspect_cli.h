// The `inspect` command of rsslab_ctl: one report, then optionally a sample
// every --watch interval with the growth per hour, optionally exported for
// Prometheus under the server's metric names (docs/INSPECT.md).
//
// Example:
//   InspectCliOptions o;
//   o.pid = 1234;
//   o.watch = absl::Seconds(10);
//   o.count = 6;
//   return rsslab::RunInspect(o);  // exit status: 0, or 2 (bad pid, gone, no permission)
#ifndef RSSLAB_CTL_INSPECT_CLI_H_
#define RSSLAB_CTL_INSPECT_CLI_H_

#include <string>

#include "absl/time/time.h"
#include "ctl/inspect.h"
#include "proto/inspect.pb.h"

namespace rsslab {

struct InspectCliOptions {
  int pid = 0;
  bool json = false;
  absl::Duration watch = absl::ZeroDuration();  // zero: one report only
  int count = 0;                                 // watch samples; 0 = until interrupted
  std::string metrics_listen;                    // "" = no exporter
  double growth_threshold_mb = 8;                // the soak's default
  InspectOptions report;
};

int RunInspect(const InspectCliOptions& o);

// The exposition text for one sample: the server's gauge names where they
// mean the same (rsslab_process_resident_memory_bytes, rsslab_process_threads,
// rsslab_glibc_arenas, ...), rsslab_inspect_* for the rest.
std::string RenderInspectMetrics(const rsslab::v1::InspectReport& report,
                                 const rsslab::v1::ProcStatus& status,
                                 const rsslab::v1::MemoryMap& map,
                                 const rsslab::v1::InspectSample& sample);

}  // namespace rsslab

#endif  // RSSLAB_CTL_INSPECT_CLI_H_
