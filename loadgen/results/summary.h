// What a run measured, rebuilt from its records alone: the snapshot after
// each phase, maxima, merged latency, load steps, failed steps and (for a
// soak) the per-cycle analysis.
//
//   rsslab::SummaryBuilder b;              // fed as records are written,
//   for (auto& ev : events) b.Add(ev);     // or from ReadEvents(dir)
//   rsslab::WriteSummary(dir, b.summary());   // summary_render.h
#ifndef RSSLAB_LOADGEN_RESULTS_SUMMARY_H_
#define RSSLAB_LOADGEN_RESULTS_SUMMARY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/results/fill_check.h"
#include "loadgen/results/histogram.h"
#include "loadgen/results/soak_analysis.h"
#include "proto/results.pb.h"

namespace rsslab {

// A streaming method's totals over a run's load steps (LoadSummary's
// streams, messages_sent and messages_received).
struct StreamMessages {
  uint64_t streams = 0;  // measured, ok + failed
  uint64_t sent = 0;
  uint64_t received = 0;
};

// What the summary shows for one run.
struct RunSummary {
  std::string scenario;
  std::string target;
  bool has_footer = false;
  bool completed = false;
  // A step failed (not merely interrupted) anywhere in the run: then it is
  // never "completed", whatever the last footer says.
  bool step_failed = false;
  std::string error;
  // The last snapshot taken while the loadgen had set each phase
  // (fill, shrink, idle, trim): seed 000's "after each phase".
  std::map<std::string, rsslab::v1::Snapshot> after_phase;
  // A pre-fork service (--control=all:NAME): its master's and workers'
  // memory at the same records, by phase. after_phase's status then holds
  // the service's totals (master + workers).
  std::map<std::string, rsslab::v1::ServiceMemory> service_after_phase;
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
  // Streaming load steps by method ("package.Service/Method"); unary steps
  // are not in it.
  std::map<std::string, StreamMessages> stream_messages;
  std::vector<rsslab::v1::StepRecord> failed_steps;
  // The last trim's result (phase trim or trim step), when one ran: RSS
  // after the global release (rss_between) and after the per-thread pass.
  bool has_trim = false;
  rsslab::v1::TrimResult last_trim;
  SoakSummary soak;  // enabled for scenarios with a soak block
  // Whether the fill reached the cache limit (loadgen/results/fill_check.h); unset
  // for runs without a fill phase.
  std::optional<rsslab::v1::FillCheck> fill;
};

class SummaryBuilder {
 public:
  SummaryBuilder() = default;
  // soak_ points into s_.
  SummaryBuilder(const SummaryBuilder&) = delete;
  SummaryBuilder& operator=(const SummaryBuilder&) = delete;

  void Add(const rsslab::v1::Event& event);
  const RunSummary& summary() const { return s_; }

 private:
  void AddSnapshot(const std::string& phase, const rsslab::v1::Snapshot& snap);
  RunSummary s_;
  // Records of a service's workers (worker_pid) are the service record's
  // parts: only the first worker's count, as in logs written before the
  // service record existed.
  int first_worker_pid_ = 0;
  FillWatch fill_watch_;
  SoakAnalysis soak_{&s_.soak};
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_SUMMARY_H_
