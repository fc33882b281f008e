#include "common/trim_modes.h"

#include <fstream>
#include <sstream>
#include <string>

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
  EXPECT_EQ(TrimModeAlternatives(), "default|global|per_thread|purge");
  EXPECT_EQ(TrimModeChoices(),
            "0 (default), 1 (global only), 2 (per thread) or 3 (free-block purge)");
}

// The docs name the modes as the table does (rsslab_ctl's usage line is
// built from it).
TEST(TrimModesTest, TheServerDocNamesTheTablesModes) {
  std::ifstream in("docs/SERVER.md");
  ASSERT_TRUE(in.good()) << "docs/SERVER.md not in the test's runfiles";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("rsslab_ctl trim --mode=" + TrimModeAlternatives() + " "),
            std::string::npos)
      << "docs/SERVER.md: the trim line should read --mode=" << TrimModeAlternatives();
}

}  // namespace
}  // namespace rsslab
