// The server's phase (start, fill, shrink, idle, trim) and request counters.
//
// Counters are atomics bumped on the hot path; the phase and the counter
// values at its start are kept under a mutex so "requests in this phase" is
// exact. idle refuses the data plane so a stray client cannot spoil a
// measurement.
//
// Example:
//   PhaseState state;
//   state.Set(rsslab::v1::PHASE_FILL);
//   if (state.RefusesLoad()) ...;
//   state.CountServed(/*error=*/false);
//   PhaseCounters c = state.Counters();

#ifndef RSSLAB_SERVER_PHASE_STATE_H_
#define RSSLAB_SERVER_PHASE_STATE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"

namespace rsslab {

struct PhaseCounters {
  std::string phase;
  absl::Time phase_start;
  uint64_t served = 0;
  uint64_t served_in_phase = 0;
  uint64_t errors = 0;
  uint64_t errors_in_phase = 0;
  uint64_t refused = 0;
};

// Requests served and handler errors while one phase was current (summed
// over every time it was entered), for the per-phase metrics.
struct PhaseTotals {
  uint64_t served = 0;
  uint64_t errors = 0;
};

class PhaseState {
 public:
  PhaseState();

  // Switches phase; returns the previous one's wire name. Starts in
  // PHASE_START; idle refuses load.
  std::string Set(v1::Phase phase);
  std::string phase() const;
  bool RefusesLoad() const { return refuse_.load(std::memory_order_relaxed); }

  void CountServed(bool error) {
    served_.fetch_add(1, std::memory_order_relaxed);
    if (error) errors_.fetch_add(1, std::memory_order_relaxed);
  }
  void CountRefused() { refused_.fetch_add(1, std::memory_order_relaxed); }

  PhaseCounters Counters() const;
  // Every phase entered so far (and "start"), the current one included;
  // the served figures sum to Counters().served at the same moment.
  std::map<std::string, PhaseTotals> ByPhase() const;

 private:
  std::atomic<uint64_t> served_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<bool> refuse_{false};
  mutable absl::Mutex mu_;
  std::string phase_ ABSL_GUARDED_BY(mu_);
  absl::Time phase_start_ ABSL_GUARDED_BY(mu_);
  uint64_t served_at_start_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_at_start_ ABSL_GUARDED_BY(mu_) = 0;
  // Totals of the phases already left (kept off the hot path: added up
  // when the phase changes).
  std::map<std::string, PhaseTotals> closed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_PHASE_STATE_H_
