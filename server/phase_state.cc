#include "server/phase_state.h"

#include "common/phase.h"

namespace rsslab {

PhaseState::PhaseState() : phase_(PhaseName(v1::PHASE_START)), phase_start_(absl::Now()) {}

std::string PhaseState::Set(v1::Phase phase) {
  absl::MutexLock lock(&mu_);
  std::string previous = phase_;
  const uint64_t served = served_.load();
  const uint64_t errors = errors_.load();
  PhaseTotals& closed = closed_[previous];
  closed.served += served - served_at_start_;
  closed.errors += errors - errors_at_start_;
  phase_ = PhaseName(phase);
  phase_start_ = absl::Now();
  served_at_start_ = served;
  errors_at_start_ = errors;
  refuse_.store(phase == v1::PHASE_IDLE);
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

std::map<std::string, PhaseTotals> PhaseState::ByPhase() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, PhaseTotals> out = closed_;
  PhaseTotals& current = out[phase_];
  current.served += served_.load() - served_at_start_;
  current.errors += errors_.load() - errors_at_start_;
  return out;
}

}  // namespace rsslab
