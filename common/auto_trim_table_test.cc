#include "common/auto_trim_table.h"

#include <cmath>

#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(AutoTrimTable, ModesAreOneList) {
  EXPECT_EQ(AutoTrimModeNames(","), "off,after_burst,interval");
  EXPECT_EQ(*ParseAutoTrimMode("after_burst"), AutoTrimMode::kAfterBurst);
  EXPECT_EQ(AutoTrimModeName(AutoTrimMode::kInterval), std::string("interval"));
  EXPECT_EQ(ParseAutoTrimMode("sometimes").status().message(),
            "--auto_trim must be off, after_burst or interval; got 'sometimes'");
  EXPECT_EQ(ParseAutoTrimMode("x\x1b", "auto_trim(mode=)").status().message(),
            "auto_trim(mode=) must be off, after_burst or interval; got 'x\\x1b'");
}

TEST(AutoTrimTable, OneBoundNamedAsEachCallerSpellsIt) {
  const AutoTrimKnob& f = AutoTrimKnobByKeyword("settle_fraction");
  EXPECT_TRUE(CheckAutoTrimValue(f, 0.99, AutoTrimCaller::kServerFlag).ok());
  EXPECT_EQ(CheckAutoTrimValue(f, 0.995, AutoTrimCaller::kServerFlag).message(),
            "--auto_trim_settle_fraction must be between 0 and 0.99; got 0.995");
  EXPECT_EQ(CheckAutoTrimValue(f, 0.995, AutoTrimCaller::kPackage).message(),
            "auto_trim(settle_fraction=) must be between 0 and 0.99; got 0.995");
  EXPECT_FALSE(CheckAutoTrimValue(f, std::nan(""), AutoTrimCaller::kPackage).ok());
  // The flag is in ms, the keyword in s: the same bound in each unit.
  const AutoTrimKnob& s = AutoTrimKnobByKeyword("settle_s");
  EXPECT_EQ(CheckAutoTrimValue(s, 3600001, AutoTrimCaller::kServerFlag).message(),
            "--auto_trim_settle_ms must be between 0 and 3600000; got 3600001");
  EXPECT_EQ(CheckAutoTrimValue(s, 3601, AutoTrimCaller::kPackage).message(),
            "auto_trim(settle_s=) must be between 0 and 3600; got 3601");
  EXPECT_EQ(FindAutoTrimFlag("auto_trim_gap_mb"), &AutoTrimKnobByKeyword("gap_mb"));
  EXPECT_EQ(FindAutoTrimFlag(""), nullptr);  // tick_s has no flag
}

}  // namespace
}  // namespace rsslab
