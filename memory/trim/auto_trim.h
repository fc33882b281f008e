// The automatic trim policy (--auto_trim) and the small thread that runs it.
//
// AutoTrimPolicy is pure: fed samples (time, requests served so far, RSS,
// live-bytes estimate) it answers "trim now?", so it is unit-tested without a
// server. AutoTrimThread samples cheap counters every tick (/proc/self/statm,
// never smaps) on a thread named rsslab-trim and calls the trim function when
// the policy says so.
//
//   after_burst  trim once load has dropped (request rate below
//                settle_fraction of its recent peak, or zero) for `settle`,
//                if RSS exceeds the live estimate by at least `gap_bytes`.
//                One trim per burst: it re-arms only when load rises again.
//   interval     trim every `interval` if the gap is at least `gap_bytes`.
//   Either way, never twice within `min_spacing` (manual trims count too).
//
// Example:
//   AutoTrimOptions o;
//   o.mode = AutoTrimOptions::Mode::kAfterBurst;
//   AutoTrimPolicy policy(o, absl::Now());
//   AutoTrimDecision d = policy.Observe({now, served, rss, live});
//   if (d.trim) { RunTrim(d.trigger); policy.OnTrim(now); }

#ifndef RSSLAB_MEMORY_TRIM_AUTO_TRIM_H_
#define RSSLAB_MEMORY_TRIM_AUTO_TRIM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auto_trim_table.h"

namespace rsslab {

struct AutoTrimOptions {
  using Mode = AutoTrimMode;
  Mode mode = Mode::kOff;
  // Trim only when RSS - live estimate is at least this much: a trim that
  // can free little is pure cost.
  int64_t gap_bytes = 16ll << 20;
  // after_burst: load must have stayed low this long.
  absl::Duration settle = absl::Seconds(2);
  // after_burst: "low" is a rate at or below this fraction of the recent
  // peak (or zero).
  double settle_fraction = 0.1;
  // interval: time between trims.
  absl::Duration interval = absl::Seconds(60);
  // Never two trims closer than this (automatic or manual).
  absl::Duration min_spacing = absl::Seconds(10);
  // How often the thread samples; the rate is measured over `rate_window`,
  // and the recent peak halves every `peak_half_life`.
  absl::Duration tick = absl::Milliseconds(200);
  absl::Duration rate_window = absl::Seconds(1);
  absl::Duration peak_half_life = absl::Seconds(60);
};

// Checks the knobs against the one table (auto_trim_table.h); the message
// names the knob as `caller` spells it (tick_s only for the package: the
// server's tick is fixed).
absl::Status ValidateAutoTrimOptions(const AutoTrimOptions& o,
                                     AutoTrimCaller caller = AutoTrimCaller::kServerFlag);

struct AutoTrimSample {
  absl::Time now;
  uint64_t requests = 0;   // served so far (monotonic)
  int64_t rss_bytes = 0;
  int64_t live_bytes = 0;  // estimate of memory in use
};

struct AutoTrimDecision {
  bool trim = false;
  std::string trigger;  // auto_after_burst | auto_interval
  // The policy's view at this sample, for snapshots and tests.
  double rate = 0;       // requests/s over rate_window
  double peak_rate = 0;  // decayed recent peak
  int64_t gap_bytes = 0;
  bool low = false;      // load counts as dropped
  bool armed = false;    // after_burst: a burst happened since the last trim
};

class AutoTrimPolicy {
 public:
  AutoTrimPolicy(const AutoTrimOptions& options, absl::Time start);

  AutoTrimDecision Observe(const AutoTrimSample& s);
  // Any trim (this policy's or a manual one) at `at`: restarts spacing and
  // the interval, and disarms after_burst until load rises again.
  void OnTrim(absl::Time at);

 private:
  const AutoTrimOptions o_;
  std::deque<std::pair<absl::Time, uint64_t>> window_;
  double peak_ = 0;
  absl::Time peak_at_;
  absl::Time low_since_ = absl::InfiniteFuture();
  absl::Time last_trim_ = absl::InfinitePast();
  absl::Time interval_anchor_;
  bool armed_ = false;
};

// Runs an AutoTrimPolicy on its own thread (named rsslab-trim).
//
//   AutoTrimThread t(options, {sample_fn, trim_fn});
//   t.Start();  ...  t.Stop();
class AutoTrimThread {
 public:
  struct Hooks {
    // Fills requests, rss_bytes, live_bytes (now is set by the thread).
    std::function<void(AutoTrimSample*)> sample;
    // Runs a trim with this trigger; returns when done.
    std::function<void(const std::string& trigger)> trim;
  };
  AutoTrimThread(const AutoTrimOptions& options, Hooks hooks);
  ~AutoTrimThread();  // Stop()

  void Start();
  void Stop();
  // Tells the policy about a trim it did not start (manual, phase).
  void NoteTrim(absl::Time at);
  AutoTrimDecision last() const;

 private:
  void Loop();

  const AutoTrimOptions options_;
  const Hooks hooks_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  AutoTrimPolicy policy_ ABSL_GUARDED_BY(mu_);
  AutoTrimDecision last_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace rsslab

#endif  // RSSLAB_MEMORY_TRIM_AUTO_TRIM_H_
