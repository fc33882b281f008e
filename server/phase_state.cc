#include "server/phase_state.h"

namespace rsslab {

PhaseState::PhaseState() : phase_("start"), phase_start_(absl::Now()) {}

bool PhaseState::IsKnown(absl::string_view phase) {
  return phase == "fill" || phase == "shrink" || phase == "idle" || phase == "trim" ||
         phase == "start";
}

std::string PhaseState::Set(absl::string_view phase) {
  absl::MutexLock lock(&mu_);
  std::string previous = phase_;
  phase_ = std::string(phase);
  phase_start_ = absl::Now();
  served_at_start_ = served_.load();
  errors_at_start_ = errors_.load();
  refuse_.store(phase == "idle");
  return previous;
}

std::string PhaseState::phase() const {
  absl::MutexLock lock(&mu_);
  return phase_;
}

PhaseCounters PhaseState::Counters() const {
  absl::MutexLock lock(&mu_);
  PhaseCounters c;
  c.phase = phase_;
  c.phase_start = phase_start_;
  c.served = served_.load();
  c.errors = errors_.load();
  c.refused = refused_.load();
  c.served_in_phase = c.served - served_at_start_;
  c.errors_in_phase = c.errors - errors_at_start_;
  return c;
}

}  // namespace rsslab
