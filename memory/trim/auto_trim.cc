#include "memory/trim/auto_trim.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"

namespace rsslab {

absl::Status ValidateAutoTrimOptions(const AutoTrimOptions& o, AutoTrimCaller caller) {
  // Each knob in the keyword's unit (MiB, seconds), as the table has it.
  const std::pair<const char*, double> values[] = {
      {"gap_mb", static_cast<double>(o.gap_bytes) / (1 << 20)},
      {"settle_s", absl::ToDoubleSeconds(o.settle)},
      {"settle_fraction", o.settle_fraction},
      {"interval_s", absl::ToDoubleSeconds(o.interval)},
      {"min_spacing_s", absl::ToDoubleSeconds(o.min_spacing)},
      {"tick_s", absl::ToDoubleSeconds(o.tick)},
  };
  for (const auto& [keyword, value] : values) {
    const AutoTrimKnob& k = AutoTrimKnobByKeyword(keyword);
    const bool has_flag = *k.flag != '\0';
    if (caller == AutoTrimCaller::kServerFlag && !has_flag) continue;
    const double scale = caller == AutoTrimCaller::kServerFlag ? k.flag_scale : 1;
    if (absl::Status s = CheckAutoTrimValue(k, value * scale, caller); !s.ok()) return s;
  }
  if (o.tick <= absl::ZeroDuration() || o.rate_window < o.tick ||
      o.peak_half_life <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("auto trim tick, rate window and peak half-life must be > 0");
  }
  return absl::OkStatus();
}

AutoTrimPolicy::AutoTrimPolicy(const AutoTrimOptions& options, absl::Time start)
    : o_(options), peak_at_(start), interval_anchor_(start) {}

void AutoTrimPolicy::OnTrim(absl::Time at) {
  last_trim_ = at;
  interval_anchor_ = at;
  armed_ = false;
}

AutoTrimDecision AutoTrimPolicy::Observe(const AutoTrimSample& s) {
  AutoTrimDecision d;
  // Rate over the window: oldest kept sample to this one.
  window_.emplace_back(s.now, s.requests);
  while (window_.size() > 2 && s.now - window_[1].first >= o_.rate_window) window_.pop_front();
  const auto& oldest = window_.front();
  double span = absl::ToDoubleSeconds(s.now - oldest.first);
  d.rate = span > 0 && s.requests >= oldest.second ? (s.requests - oldest.second) / span : 0;

  // A decaying peak: a service that settles at a lower steady rate stops
  // counting as "dropped" once the old peak has faded.
  double age = absl::ToDoubleSeconds(s.now - peak_at_);
  double decayed = peak_ * std::exp2(-age / absl::ToDoubleSeconds(o_.peak_half_life));
  if (d.rate >= decayed) {
    peak_ = d.rate;
  } else {
    peak_ = decayed;
  }
  peak_at_ = s.now;
  d.peak_rate = peak_;

  d.low = d.rate == 0 || d.rate <= o_.settle_fraction * peak_;
  if (!d.low) {
    armed_ = true;  // load is up: the next drop is a new burst's end
    low_since_ = absl::InfiniteFuture();
  } else if (low_since_ == absl::InfiniteFuture()) {
    low_since_ = s.now;
  }
  d.armed = armed_;
  d.gap_bytes = s.rss_bytes - s.live_bytes;

  const bool spaced = s.now - last_trim_ >= o_.min_spacing;
  const bool gap = d.gap_bytes >= o_.gap_bytes;
  switch (o_.mode) {
    case AutoTrimOptions::Mode::kAfterBurst:
      if (armed_ && d.low && s.now - low_since_ >= o_.settle && spaced && gap) {
        d.trim = true;
        d.trigger = "auto_after_burst";
      }
      break;
    case AutoTrimOptions::Mode::kInterval:
      if (s.now - interval_anchor_ >= o_.interval && spaced) {
        if (gap) {
          d.trim = true;
          d.trigger = "auto_interval";
        } else {
          interval_anchor_ = s.now;  // nothing worth freeing: next interval
        }
      }
      break;
    case AutoTrimOptions::Mode::kOff:
      break;
  }
  return d;
}

AutoTrimThread::AutoTrimThread(const AutoTrimOptions& options, Hooks hooks)
    : options_(options), hooks_(std::move(hooks)), policy_(options, absl::Now()) {}

AutoTrimThread::~AutoTrimThread() { Stop(); }

void AutoTrimThread::Start() {
  if (options_.mode == AutoTrimOptions::Mode::kOff || thread_.joinable()) return;
  // A baseline sample now: if the thread's first tick came only after a
  // whole burst (a starved thread on a busy machine), the rate would be
  // measured from a sample taken after the burst and the burst never seen.
  AutoTrimSample s;
  hooks_.sample(&s);
  s.now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    last_ = policy_.Observe(s);
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "rsslab-trim");
    Loop();
  });
}

void AutoTrimThread::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AutoTrimThread::NoteTrim(absl::Time at) {
  absl::MutexLock lock(&mu_);
  policy_.OnTrim(at);
}

AutoTrimDecision AutoTrimThread::last() const {
  absl::MutexLock lock(&mu_);
  return last_;
}

void AutoTrimThread::Loop() {
  absl::Time next = absl::Now();
  while (true) {
    next += options_.tick;
    {
      absl::MutexLock lock(&mu_);
      // Wakes early only to stop.
      mu_.AwaitWithDeadline(absl::Condition(&stop_), next);
      if (stop_) return;
    }
    AutoTrimSample s;
    hooks_.sample(&s);
    s.now = absl::Now();
    AutoTrimDecision d;
    {
      absl::MutexLock lock(&mu_);
      d = policy_.Observe(s);
      last_ = d;
    }
    if (!d.trim) continue;
    // Outside the lock: a trim takes milliseconds to seconds.
    hooks_.trim(d.trigger);
    absl::MutexLock lock(&mu_);
    policy_.OnTrim(absl::Now());
    next = absl::Now();  // no catch-up burst of ticks after a long trim
  }
}

}  // namespace rsslab
