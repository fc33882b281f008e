#include "common/trim_modes.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace {

// Every mode the proto names is in the table once, under one name that
// parses back to it.
TEST(TrimModesTest, TheTableCoversTheProtoOnce) {
  int listed = 0;
  for (int n = v1::TrimMode_MIN; n <= v1::TrimMode_MAX; ++n) {
    if (!v1::TrimMode_IsValid(n)) continue;
    const auto mode = static_cast<v1::TrimMode>(n);
    ASSERT_STRNE(TrimModeName(mode), "") << n;
    EXPECT_EQ(ParseTrimModeName(TrimModeName(mode)), mode);
    ++listed;
  }
  EXPECT_EQ(listed, static_cast<int>(sizeof(kTrimModes) / sizeof(kTrimModes[0])));
  EXPECT_EQ(ParseTrimModeName("global_only"), v1::TRIM_GLOBAL_ONLY);
  EXPECT_EQ(ParseTrimModeName("Default"), std::nullopt);
  EXPECT_EQ(ParseTrimModeName(""), std::nullopt);
}

TEST(TrimModesTest, ListsForMessages) {
  EXPECT_EQ(TrimModeNames(), "default, global, per_thread or purge");
  EXPECT_EQ(TrimModeChoices(),
            "0 (default), 1 (global only), 2 (per thread) or 3 (free-block purge)");
}

}  // namespace
}  // namespace rsslab
