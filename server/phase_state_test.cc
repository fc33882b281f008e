#include "server/phase_state.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(PhaseState, StartsInStartAndReturnsThePreviousPhase) {
  PhaseState s;
  EXPECT_EQ(s.phase(), "start");
  EXPECT_EQ(s.Set(v1::PHASE_FILL), "start");
  EXPECT_EQ(s.Set(v1::PHASE_SHRINK), "fill");
  EXPECT_EQ(s.phase(), "shrink");
}

TEST(PhaseState, OnlyIdleRefusesLoad) {
  PhaseState s;
  EXPECT_FALSE(s.RefusesLoad());
  for (v1::Phase p : {v1::PHASE_FILL, v1::PHASE_SHRINK, v1::PHASE_TRIM, v1::PHASE_START}) {
    s.Set(p);
    EXPECT_FALSE(s.RefusesLoad()) << s.phase();
  }
  s.Set(v1::PHASE_IDLE);
  EXPECT_TRUE(s.RefusesLoad());
  s.Set(v1::PHASE_FILL);
  EXPECT_FALSE(s.RefusesLoad());
}

TEST(PhaseState, CountsInThePhaseAndInTotal) {
  PhaseState s;
  s.CountServed(false);  // in "start"
  s.Set(v1::PHASE_FILL);
  s.CountServed(false);
  s.CountServed(true);
  s.CountRefused();
  PhaseCounters c = s.Counters();
  EXPECT_EQ(c.phase, "fill");
  EXPECT_EQ(c.served, 3u);
  EXPECT_EQ(c.served_in_phase, 2u);
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.errors_in_phase, 1u);
  EXPECT_EQ(c.refused, 1u);
}

TEST(PhaseState, ByPhaseSumsEveryVisitAndAddsUpToTheTotal) {
  PhaseState s;
  s.Set(v1::PHASE_FILL);
  s.CountServed(false);
  s.Set(v1::PHASE_SHRINK);
  s.CountServed(true);
  s.CountServed(false);
  s.Set(v1::PHASE_FILL);  // fill again: its totals add up
  s.CountServed(false);
  std::map<std::string, PhaseTotals> by = s.ByPhase();
  EXPECT_EQ(by["fill"].served, 2u);
  EXPECT_EQ(by["shrink"].served, 2u);
  EXPECT_EQ(by["shrink"].errors, 1u);
  EXPECT_EQ(by["start"].served, 0u);
  uint64_t sum = 0;
  for (const auto& [name, t] : by) sum += t.served;
  EXPECT_EQ(sum, s.Counters().served);
}

}  // namespace
}  // namespace rsslab
