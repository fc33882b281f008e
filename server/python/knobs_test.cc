#include "server/python/knobs.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/python/error_log.h"

namespace rsslab {
namespace {

KnobTable Table() {
  KnobTable t;
  t["dict_items"] = KnobBound::Int(0, 20000);
  t["sigma"] = KnobBound::Float(0, 4);
  t["dict_shape"] = KnobBound::Choice({"flat", "nested"});
  return t;
}

TEST(Knobs, InRangeAndUnknownPass) {
  const KnobTable t = Table();
  EXPECT_TRUE(CheckParam(t, "dict_items", "0").ok());
  EXPECT_TRUE(CheckParam(t, "dict_items", "20000").ok());
  EXPECT_TRUE(CheckParam(t, "sigma", "1.5").ok());
  EXPECT_TRUE(CheckParam(t, "dict_shape", "nested").ok());
  EXPECT_TRUE(CheckParam(t, "anything_else", "x").ok());
}

TEST(Knobs, EdgeValuesAreRefusedWithTheRange) {
  const KnobTable t = Table();
  for (const char* v : {"-1", "20001", "1e9", "9223372036854775808", "1.5", "", "abc", "0x10"}) {
    absl::Status s = CheckParam(t, "dict_items", v);
    ASSERT_TRUE(absl::IsInvalidArgument(s)) << v;
    EXPECT_TRUE(absl::StrContains(s.message(), "between 0 and 20000")) << s;
  }
  for (const char* v : {"nan", "inf", "-inf", "-0.1", "4.0001", "1e400"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(CheckParam(t, "sigma", v))) << v;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(CheckParam(t, "dict_shape", "FLAT")));
}

TEST(Knobs, GenericLimitsAndNoEcho) {
  const KnobTable t;
  std::string huge(3 << 20, 'x');
  absl::Status s = CheckParam(t, "k", huge);
  ASSERT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_LT(s.message().size(), 200u) << "echoed the input";
  s = CheckParam(t, huge, "v");
  ASSERT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_LT(s.message().size(), 200u);
  s = CheckParam(t, "\xff\xfe", "v");
  ASSERT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_TRUE(absl::StrContains(s.message(), "UTF-8")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "\\xff")) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckParam(t, "k", "\xc0\x80")));  // overlong NUL
  EXPECT_TRUE(absl::IsInvalidArgument(CheckParam(t, "", "v")));
  std::map<std::string, std::string> many;
  for (size_t i = 0; i <= kMaxParams; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_TRUE(absl::IsInvalidArgument(CheckParams(t, many)));
}

TEST(ErrorLog, FirstInFullThenOneLinePerInterval) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* out = open_memstream(&buf, &len);
  {
    HandlerErrorLog log(2, absl::Seconds(10), out);
    absl::Time t = absl::UnixEpoch();
    EXPECT_TRUE(log.Note("ValueError", t));
    EXPECT_TRUE(log.Note("ValueError", t));
    for (int i = 0; i < 1000; ++i) EXPECT_FALSE(log.Note(i % 2 ? "KeyError" : "ValueError", t));
    log.Note("ValueError", t + absl::Seconds(11));  // the interval ended: one line
    EXPECT_EQ(log.total(), 1003u);
    EXPECT_EQ(log.Totals()["ValueError"], 503u);
    EXPECT_EQ(log.Totals()["KeyError"], 500u);
    for (int i = 0; i < 100; ++i) log.Note("T" + std::to_string(i), t + absl::Seconds(12));
    EXPECT_LE(log.Totals().size(), static_cast<size_t>(HandlerErrorLog::kMaxTypes) + 1);
  }
  fclose(out);
  std::string text(buf, len);
  free(buf);
  EXPECT_TRUE(absl::StrContains(text, "KeyError x500, ValueError x501")) << text;
  EXPECT_LE(std::count(text.begin(), text.end(), '\n'), 3) << text;
}

}  // namespace
}  // namespace rsslab
