// Soak analysis: per-cycle figures built from a soak's records, the growth
// between cycles, and the cycles that look like a leak.
//
//   rsslab::SoakSummary k;
//   rsslab::SoakAnalysis a(&k);
//   for (const auto& e : events) a.Add(e);   // header first: enables it
//   if (k.flagged > 0) ...;                   // k.cycles[i].flag_reason
//
// The SummaryBuilder (summary.h) runs one for every run; it stays disabled
// unless the header's scenario has a soak block.
#ifndef RSSLAB_LOADGEN_RESULTS_SOAK_ANALYSIS_H_
#define RSSLAB_LOADGEN_RESULTS_SOAK_ANALYSIS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loadgen/results/histogram.h"
#include "proto/results.pb.h"

namespace rsslab {

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
  // A pre-fork service: each process's post-idle RSS by pid (the master's
  // too). post_idle_rss is their sum; a flagged cycle's reason names the
  // process that grew most.
  std::map<int, int64_t> post_idle_by_pid;
  std::map<int, std::string> role_by_pid;
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
// like, where the first cycle's figures are only the warm-up. For a
// service the RSS is the total, and a flagged cycle's reason names the
// process whose post-idle RSS grew most.
void ComputeSoakGrowth(double threshold_mb, std::vector<SoakCycle>* cycles);

// Feeds a SoakSummary one record at a time (records in log order).
class SoakAnalysis {
 public:
  // `out` must outlive this; it is updated by every Add.
  explicit SoakAnalysis(SoakSummary* out) : k_(out) {}
  SoakAnalysis(const SoakAnalysis&) = delete;
  SoakAnalysis& operator=(const SoakAnalysis&) = delete;

  // A header whose scenario has a soak block enables the analysis (and sets
  // its threshold); until then every other record is ignored.
  void Add(const rsslab::v1::Event& e);

 private:
  void AddRecord(const rsslab::v1::Event& e);
  SoakCycle& Cycle(int cycle, int64_t at);
  SoakSummary* k_;
  // Only the open cycle's latency is kept as a histogram (fixed memory);
  // closed cycles keep their p99.
  int hist_cycle_ = -1;
  Histogram cycle_hist_;
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_SOAK_ANALYSIS_H_
