#include "common/handler_params.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(HandlerParams, ParsesPairsAndKeepsEqualsInValues) {
  auto p = ParseHandlerParams("median=4096,sigma=1.5,expr=a=b");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 3u);
  EXPECT_EQ(p->at("median"), "4096");
  EXPECT_EQ(p->at("sigma"), "1.5");
  EXPECT_EQ(p->at("expr"), "a=b");
}

TEST(HandlerParams, EmptyTextIsNoParamsAndEmptyValuesAreKept) {
  auto none = ParseHandlerParams("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto empty_value = ParseHandlerParams("k=");
  ASSERT_TRUE(empty_value.ok());
  EXPECT_EQ(empty_value->at("k"), "");
}

TEST(HandlerParams, TheLastOfARepeatedKeyWins) {
  auto p = ParseHandlerParams("k=1,k=2");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->at("k"), "2");
}

TEST(HandlerParams, ErrorNamesTheFirstBadItem) {
  for (const char* bad : {"median", "=4096", "a=1,,b=2", "a=1,b", ","}) {
    auto p = ParseHandlerParams(bad);
    EXPECT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseHandlerParams("a=1,oops,c=3").status().message(), "'oops' is not key=value");
}

}  // namespace
}  // namespace rsslab
