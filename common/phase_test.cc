#include "common/phase.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(Phase, EveryPhaseRoundTripsThroughItsWireName) {
  for (int i = v1::Phase_MIN; i <= v1::Phase_MAX; ++i) {
    if (!v1::Phase_IsValid(i) || i == v1::PHASE_UNSPECIFIED) continue;
    const auto p = static_cast<v1::Phase>(i);
    std::optional<v1::Phase> back = ParsePhase(PhaseName(p));
    ASSERT_TRUE(back.has_value()) << PhaseName(p);
    EXPECT_EQ(*back, p);
  }
  EXPECT_EQ(PhaseName(v1::PHASE_FILL), "fill");
  EXPECT_EQ(PhaseName(v1::PHASE_START), "start");
}

TEST(Phase, RefusesWhatIsNotAWireName) {
  for (const char* bad : {"", "unspecified", "FILL", "PHASE_FILL", "Fill", "fil", "fill ", "drain"}) {
    EXPECT_FALSE(ParsePhase(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_EQ(PhaseName(v1::PHASE_UNSPECIFIED), "");
}

TEST(Phase, CycleAndAllowedListAreSeed000sOrder) {
  EXPECT_EQ(AllowedPhases(), "fill, shrink, idle, trim (or start)");
}

}  // namespace
}  // namespace rsslab
