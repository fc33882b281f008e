#include "loadgen/results/summary.h"

#include <algorithm>

namespace rsslab {

using ::rsslab::v1::Event;

void SummaryBuilder::AddSnapshot(const std::string& phase,
                                 const rsslab::v1::Snapshot& snap) {
  if (!phase.empty()) s_.after_phase[phase] = snap;
  if (!phase.empty() && snap.has_service()) s_.service_after_phase[phase] = snap.service();
  s_.hwm_bytes = std::max<int64_t>(s_.hwm_bytes, snap.status().hwm_bytes());
  s_.threads = std::max(s_.threads, snap.status().threads());
  s_.arenas = std::max(s_.arenas, snap.memory_map().arena_count());
  if (snap.config().threads() > 0) s_.workers = snap.config().threads();
  else if (snap.workers().configured() > 0) s_.workers = snap.workers().configured();
  if (!snap.allocator().empty()) s_.allocator = snap.allocator();
  if (!snap.config().handler().empty()) {
    s_.handler = snap.config().handler();
    s_.handler_params_recorded = !snap.config().handler_params().empty();
    s_.handler_params.clear();
    for (const auto& kv : snap.config().handler_params()) s_.handler_params[kv.first] = kv.second;
  }
}

void SummaryBuilder::Add(const Event& e) {
  if (e.worker_pid() != 0) {
    if (first_worker_pid_ == 0) first_worker_pid_ = e.worker_pid();
    if (e.worker_pid() != first_worker_pid_) return;
  }
  if (auto fill = e.has_footer() ? fill_watch_.Finish() : fill_watch_.Add(e)) s_.fill = *fill;
  switch (e.record_case()) {
    case Event::kHeader:
      s_.scenario = e.header().scenario_name();
      s_.target = e.header().target();
      break;
    case Event::kSnapshot:
      // A watch record is not the end of a phase: it counts for the
      // maxima only.
      AddSnapshot(e.label() == "watch" ? "" : e.loadgen_phase(), e.snapshot());
      break;
    case Event::kPhase:
      // trim's "before" is not an "after trim" figure, but counts for HWM.
      if (e.phase().has_before()) AddSnapshot("", e.phase().before());
      AddSnapshot(e.loadgen_phase(), e.phase().snapshot());
      if (e.phase().has_trim()) {
        s_.has_trim = true;
        s_.last_trim = e.phase().trim();
      }
      break;
    case Event::kTrim:
      AddSnapshot(e.loadgen_phase(), e.trim().after());
      s_.has_trim = true;
      s_.last_trim = e.trim().trim();
      break;
    case Event::kLoad: {
      s_.loads.push_back(e.load());
      auto h = Histogram::FromProto(e.load().histogram());
      if (h.ok()) s_.latency.Merge(*h);
      s_.requests += e.load().requests_ok() + e.load().requests_failed();
      s_.failed += e.load().requests_failed();
      s_.load_seconds += e.load().elapsed_s();
      if (e.load().streaming()) {
        StreamMessages& m = s_.stream_messages[e.load().call()];
        m.streams += e.load().requests_ok() + e.load().requests_failed();
        m.sent += e.load().messages_sent();
        m.received += e.load().messages_received();
      }
      break;
    }
    case Event::kStep:
      if (!e.step().ok()) {
        s_.failed_steps.push_back(e.step());
        // An interrupted step (Ctrl-C, a resumed run's cut) measured
        // nothing wrong; any other failure makes the run incomplete
        // whatever a later footer says (a resumed run's footer covers
        // only its own part).
        if (e.step().error() != "interrupted") s_.step_failed = true;
      }
      break;
    case Event::kFooter:
      s_.has_footer = true;
      s_.completed = e.footer().completed() && !s_.step_failed;
      if (s_.step_failed && e.footer().completed()) {
        s_.error = "a step failed in an earlier part of this run (see below)";
        break;
      }
      s_.error = e.footer().error();
      break;
    default:
      break;
  }
  soak_.Add(e);
}

}  // namespace rsslab
