// Opening a run: the --metrics_listen port, then the run directory (new, or
// the interrupted run's for --resume, or a --results_dir cell's, locked)
// with its first records.
//
//   rsslab::run::Metrics metrics;
//   if (int rc = rsslab::run::OpenMetrics(inv, &metrics); rc != 0) return rc;
//   rsslab::run::RunDir dir;
//   if (int rc = rsslab::run::OpenRunDir(inv, &dir); rc != 0) return rc;
#ifndef RSSLAB_LOADGEN_RUN_RUN_DIR_H_
#define RSSLAB_LOADGEN_RUN_RUN_DIR_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "common/metrics/http_server.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/summary.h"
#include "loadgen/run/invocation.h"
#include "loadgen/sweep/resume.h"

namespace rsslab {
namespace run {

// --metrics_listen: the run's progress for a Prometheus scraper.
struct Metrics {
  rsslab::LoadgenMetrics values;
  std::unique_ptr<rsslab::metrics::MetricsHttpServer> http;  // null when off
};

// Opened before the run directory exists: a taken port is a usage error with
// nothing written or sent. Returns the exit code to stop with, 0 to go on.
int OpenMetrics(const Invocation& inv, Metrics* metrics);

struct RunDir {
  std::unique_ptr<rsslab::EventLog> log;
  // Fed every record of this run (and, for a resumed soak, the earlier
  // part's): the run's summary.
  rsslab::SummaryBuilder summary;
  std::set<std::string> done_cells;  // resumed sweep: cells kept
  rsslab::SoakResume soak_resume;    // resumed soak: where it goes on
  uint64_t torn_bytes = 0;           // resumed: the torn last line cut off
  int lock_fd = -1;                  // --results_dir: held while this run writes there
};

// --results_dir: the cell's directory, made or found. Locked for this
// run (flock on DIR/lock: released by the kernel however the process
// ends), so two tasks given the same cell never write one events.jsonl
// together. A directory with records is resumed in place (inv->resume);
// one whose selected cells all have a result and a footer is done: *done,
// nothing written. Returns the exit code to stop with, 0 to go on.
int PrepareCellDir(Invocation* inv, RunDir* dir, bool* done);

// A new run: an empty directory and its header record. A resumed one: its
// records so far kept, a `resumed` record appended. Returns the exit code
// to stop with, 0 to go on.
int OpenRunDir(const Invocation& inv, RunDir* dir);

}  // namespace run
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_RUN_DIR_H_
