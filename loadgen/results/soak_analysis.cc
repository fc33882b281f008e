#include "loadgen/results/soak_analysis.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "common/growth/growth.h"

namespace rsslab {

using ::rsslab::v1::Event;

void SoakAnalysis::Add(const Event& e) {
  if (e.has_header() && e.header().scenario().has_soak()) {
    const auto& soak = e.header().scenario().soak();
    k_->enabled = true;
    if (soak.growth_threshold_mb() > 0) k_->threshold_mb = soak.growth_threshold_mb();
    k_->watch_interval_s = soak.watch_interval_s();
  }
  if (k_->enabled) AddRecord(e);
}

SoakCycle& SoakAnalysis::Cycle(int cycle, int64_t at) {
  auto& v = k_->cycles;
  auto it = std::lower_bound(
      v.begin(), v.end(), cycle,
      [](const SoakCycle& c, int n) { return c.cycle < n; });
  if (it == v.end() || it->cycle != cycle) {
    SoakCycle c;
    c.cycle = cycle;
    c.start_unix_nanos = at;
    it = v.insert(it, c);
  }
  it->end_unix_nanos = std::max(it->end_unix_nanos, at);
  return *it;
}

void SoakAnalysis::AddRecord(const Event& e) {
  SoakSummary& k = *k_;
  const int64_t at = e.unix_nanos();
  auto seen = [&](const rsslab::v1::Snapshot& snap) {
    k.last_snapshot = snap;
    k.last_snapshot_unix_nanos = at;
  };
  const std::string& phase = e.loadgen_phase();
  switch (e.record_case()) {
    case Event::kSnapshot: {
      seen(e.snapshot());
      if (e.label() == "watch") {
        ++k.watch_records;
        if (e.interval_latency().count() > 0) {
          const double p99 = e.interval_latency().p99_us();
          if (k.first_interval_p99_us < 0) k.first_interval_p99_us = p99;
          k.last_interval_p99_us = p99;
          k.max_interval_p99_us = std::max(k.max_interval_p99_us, p99);
        }
        return;
      }
      SoakCycle& c = Cycle(e.cycle(), at);
      if (!phase.empty()) c.rss[phase] = e.snapshot().status().rss_bytes();
      // Only a snapshot step in idle is "post-idle": the idle set_phase
      // record is taken as idle begins.
      if (phase == "idle") {
        c.post_idle_rss = e.snapshot().status().rss_bytes();
        c.threads = e.snapshot().status().threads();
        c.arenas = e.snapshot().memory_map().arena_count();
        c.post_idle_by_pid.clear();
        for (const auto& p : e.snapshot().service().processes()) {
          c.post_idle_by_pid[p.pid()] = p.rss_bytes();
          c.role_by_pid[p.pid()] = p.role();
        }
      }
      break;
    }
    case Event::kPhase: {
      seen(e.phase().snapshot());
      SoakCycle& c = Cycle(e.cycle(), at);
      // Later records of the phase overwrite this: the last is its end.
      if (!phase.empty()) c.rss[phase] = e.phase().snapshot().status().rss_bytes();
      break;
    }
    case Event::kTrim: {
      seen(e.trim().after());
      SoakCycle& c = Cycle(e.cycle(), at);
      if (!phase.empty()) c.rss[phase] = e.trim().after().status().rss_bytes();
      break;
    }
    case Event::kLoad: {
      SoakCycle& c = Cycle(e.cycle(), at);
      c.requests += e.load().requests_ok() + e.load().requests_failed();
      c.load_seconds += e.load().elapsed_s();
      if (hist_cycle_ != e.cycle()) {
        cycle_hist_.Reset();
        hist_cycle_ = e.cycle();
      }
      auto h = Histogram::FromProto(e.load().histogram());
      if (h.ok()) cycle_hist_.Merge(*h);
      c.p99_us = cycle_hist_.Percentile(99) / 1e3;
      break;
    }
    case Event::kServerLost:
      k.server_lost = true;
      k.lost_unix_nanos = e.server_lost().unix_nanos();
      k.lost_error = e.server_lost().error();
      if (e.server_lost().has_last_snapshot() &&
          e.server_lost().last_snapshot_unix_nanos() >= k.last_snapshot_unix_nanos) {
        k.last_snapshot = e.server_lost().last_snapshot();
        k.last_snapshot_unix_nanos = e.server_lost().last_snapshot_unix_nanos();
      }
      return;
    default:
      return;
  }
  ComputeSoakGrowth(k.threshold_mb, &k.cycles);
  k.flagged = 0;
  for (const auto& c : k.cycles) k.flagged += c.flagged ? 1 : 0;
}

namespace {

// "; most in worker pid 4243 (+12.0 MiB)": the process of a service whose
// post-idle RSS grew most since the previous cycle; "" for one process.
std::string MostGrowth(const SoakCycle& prev, const SoakCycle& c) {
  int pid = 0;
  int64_t most = 0;
  for (const auto& [p, rss] : c.post_idle_by_pid) {
    auto it = prev.post_idle_by_pid.find(p);
    if (it != prev.post_idle_by_pid.end() && (pid == 0 || rss - it->second > most)) {
      pid = p;
      most = rss - it->second;
    }
  }
  if (pid == 0) return "";
  return absl::StrFormat("; most in %s pid %d (%+.1f MiB)", c.role_by_pid.at(pid), pid,
                         most / 1048576.0);
}

}  // namespace

void ComputeSoakGrowth(double threshold_mb, std::vector<SoakCycle>* cycles) {
  // The rule itself is shared with `rsslab_ctl inspect --watch` (common/growth).
  std::vector<GrowthPoint> points;
  points.reserve(cycles->size());
  for (const SoakCycle& c : *cycles) {
    points.push_back({c.end_unix_nanos, c.post_idle_rss, c.threads, c.arenas});
  }
  const std::vector<GrowthStep> steps = ComputeGrowth(threshold_mb, points, "post-idle rss");
  for (size_t i = 0; i < cycles->size(); ++i) {
    SoakCycle& c = (*cycles)[i];
    const GrowthStep& s = steps[i];
    c.has_prev = s.has_prev;
    c.growth_prev = s.growth_prev;
    c.growth_first = s.growth_first;
    c.thread_change = s.thread_change;
    c.arena_change = s.arena_change;
    c.flagged = s.flagged;
    c.flag_reason = s.flag_reason;
    if (c.flagged && i > 0) c.flag_reason += MostGrowth((*cycles)[i - 1], c);
  }
}

}  // namespace rsslab
