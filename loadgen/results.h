// A run's records: events.jsonl (written as things happen) and the summary
// (summary.md, summary.csv) rebuilt from those records alone.
//
//   auto log = rsslab::EventLog::Create("results/run1", /*fsync=*/false);
//   rsslab::v1::Event e; *e.mutable_header() = ...;
//   (*log)->Append(e);                     // one JSON line, flushed now
//   ...
//   rsslab::SummaryBuilder b;              // or fed by ReadEvents(path)
//   for (auto& ev : events) b.Add(ev);
//   rsslab::WriteSummary("results/run1", b.Build());
//
// Each line is a rsslab.v1.Event printed by protobuf's JSON printer with the
// .proto field names, so `jq`, pandas and the report tool read it directly,
// and an interrupted run keeps every line already written (a torn last line
// is skipped when read back).
#ifndef RSSLAB_LOADGEN_RESULTS_H_
#define RSSLAB_LOADGEN_RESULTS_H_

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "loadgen/histogram.h"
#include "proto/results.pb.h"

namespace rsslab {

class EventLog {
 public:
  // Creates `dir` (and parents) and dir/events.jsonl; fails if it exists,
  // so a run never appends to another run's records.
  static absl::StatusOr<std::unique_ptr<EventLog>> Create(
      const std::string& dir, bool fsync);
  // Opens dir/events.jsonl of an interrupted run to append to it (--resume):
  // a torn last line (a record cut short by a kill: no final '\n') is cut
  // off first, its size in *torn_bytes, and numbering continues after the
  // last record's seq. Every complete line is kept as it is.
  static absl::StatusOr<std::unique_ptr<EventLog>> Reopen(
      const std::string& dir, bool fsync, uint64_t* torn_bytes);
  ~EventLog();

  // Stamps seq and (if unset) unix_nanos, writes one line and flushes it.
  absl::Status Append(rsslab::v1::Event event) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t count() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  EventLog(std::string path, FILE* f, bool fsync)
      : path_(std::move(path)), file_(f), fsync_(fsync) {}
  const std::string path_;
  mutable absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
  const bool fsync_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  // File size after the last complete record: a failed write (disk full,
  // quota) is cut back to it, so the file stays valid line by line.
  off_t good_size_ ABSL_GUARDED_BY(mu_) = 0;
};

// OK when `dir` does not exist or is empty; FAILED_PRECONDITION naming what
// is there otherwise: a new run never writes into another run's directory.
absl::Status CheckRunDirEmpty(const std::string& dir);

std::string EventToJson(const rsslab::v1::Event& event);
// Reads dir/events.jsonl; a line that does not parse (a write cut short by
// a crash) is skipped and counted in *skipped.
absl::StatusOr<std::vector<rsslab::v1::Event>> ReadEvents(
    const std::string& dir, int* skipped);

// Soak: a cycle whose post-idle RSS grew more than this (MiB) since the
// previous cycle is flagged, when the scenario's soak block sets none.
inline constexpr double kDefaultGrowthThresholdMb = 8;

// One soak cycle (one pass of the repeat step), from its phase records.
struct SoakCycle {
  int cycle = 0;  // 0-based, as in Event.cycle
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  // RSS at the end of each phase (fill, shrink, idle, trim), bytes.
  std::map<std::string, int64_t> rss;
  int64_t post_idle_rss = -1;  // -1: the cycle never reached idle's snapshot
  int threads = -1;            // at the post-idle snapshot
  int arenas = -1;
  // Filled by ComputeSoakGrowth; valid when has_prev / has_first.
  bool has_prev = false;
  int64_t growth_prev = 0;   // post-idle RSS minus the previous cycle's
  int64_t growth_first = 0;  // minus the first cycle's
  int thread_change = 0;
  int arena_change = 0;
  uint64_t requests = 0;
  double load_seconds = 0;
  double p99_us = 0;  // over the cycle's load steps, merged
  bool flagged = false;
  std::string flag_reason;
};

struct SoakSummary {
  bool enabled = false;
  double threshold_mb = kDefaultGrowthThresholdMb;
  double watch_interval_s = 0;
  std::vector<SoakCycle> cycles;
  uint64_t watch_records = 0;
  int flagged = 0;
  // Per-interval p99 drift, from the watch records' interval_latency.
  double first_interval_p99_us = -1;
  double last_interval_p99_us = -1;
  double max_interval_p99_us = -1;
  // The server went away mid-soak (a server_lost record).
  bool server_lost = false;
  int64_t lost_unix_nanos = 0;
  std::string lost_error;
  // The last snapshot of any kind (watch or phase) before the end.
  rsslab::v1::Snapshot last_snapshot;
  int64_t last_snapshot_unix_nanos = 0;
};

// Fills growth, changes and flags of `cycles` (ordered by cycle). A cycle
// is flagged when its post-idle RSS grew more than threshold_mb over the
// previous cycle's, or its thread count grew: both are what a leak looks
// like, where the first cycle's figures are only the warm-up.
void ComputeSoakGrowth(double threshold_mb, std::vector<SoakCycle>* cycles);
// "cycle 3: post-idle rss 120.1 MiB (+1.2 vs prev, +3.4 vs first), ..."
std::string SoakCycleLine(const SoakCycle& c);

// What the summary shows for one run.
struct RunSummary {
  std::string scenario;
  std::string target;
  bool has_footer = false;
  bool completed = false;
  std::string error;
  // The last snapshot taken while the loadgen had set each phase
  // (fill, shrink, idle, trim): seed 000's "after each phase".
  std::map<std::string, rsslab::v1::Snapshot> after_phase;
  int64_t hwm_bytes = -1;  // largest VmHWM seen
  int threads = -1;        // largest OS thread count seen
  int arenas = -1;         // largest glibc arena count seen
  int workers = -1;        // configured worker threads
  std::string allocator;
  // The server's handler and its effective default knobs
  // (snapshot config.handler / handler_params); handler_params_recorded is
  // false for servers from before the knobs were recorded.
  std::string handler;
  std::map<std::string, std::string> handler_params;
  bool handler_params_recorded = false;
  std::vector<rsslab::v1::LoadSummary> loads;
  Histogram latency;       // every load step merged
  uint64_t requests = 0;   // measured, ok + failed
  uint64_t failed = 0;
  double load_seconds = 0;
  std::vector<rsslab::v1::StepRecord> failed_steps;
  SoakSummary soak;  // enabled for scenarios with a soak block
};

class SummaryBuilder {
 public:
  void Add(const rsslab::v1::Event& event);
  const RunSummary& summary() const { return s_; }

 private:
  void AddSnapshot(const std::string& phase, const rsslab::v1::Snapshot& snap);
  void AddSoak(const rsslab::v1::Event& e);
  SoakCycle& Cycle(int cycle, int64_t at);
  RunSummary s_;
  // Only the open cycle's latency is kept as a histogram (fixed memory);
  // closed cycles keep their p99.
  int hist_cycle_ = -1;
  Histogram cycle_hist_;
};

// The seed-000 table's columns, in order (CSV header and Markdown table).
std::vector<std::string> SummaryColumns();
// One row of values for SummaryColumns(); "-" where nothing was measured.
std::vector<std::string> SummaryRow(const RunSummary& s);
std::string SummaryMarkdown(const RunSummary& s, const std::string& run_dir);
std::string SummaryCsv(const RunSummary& s, const std::string& run_dir);
// Writes run_dir/summary.md and run_dir/summary.csv.
// For a soak also run_dir/soak_cycles.csv (one row per cycle).
absl::Status WriteSummary(const std::string& run_dir, const RunSummary& s);
std::string SoakCyclesCsv(const SoakSummary& s);
// A short fixed-width table for a terminal.
// "web_worker.py dict_items=200 dict_shape=flat ...": the handler's file
// name and its knobs, or "-" when no snapshot said.
std::string HandlerLabel(const RunSummary& s);

// A fixed-width table of the runs, with a warning under it when the runs
// did not all use the same handler with the same knobs (their figures are
// then not comparable: e.g. web_worker's dict_shape=flat vs nested).
std::string SummaryTable(const std::vector<RunSummary>& runs,
                         const std::vector<std::string>& labels);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_H_
