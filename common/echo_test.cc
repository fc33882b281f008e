#include "common/echo.h"

#include <string>

#include "common/utf8_message.h"
#include "google/protobuf/api.pb.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/wrappers.pb.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(Echo, EscapesControlBytesSoALineCannotBeForged) {
  EXPECT_EQ(Echo("ok\r\n2026-01-01 fake\x1b[2J\x07"), "ok\\r\\n2026-01-01 fake\\x1b[2J\\x07");
  EXPECT_EQ(Echo(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(Echo("back\\slash\x7f"), "back\\\\slash\\x7f");
  EXPECT_EQ(Echo("gr\xc3\xbc\xc3\x9f"), "gr\xc3\xbc\xc3\x9f");  // UTF-8 stays readable
  EXPECT_EQ(Echo("tab\there"), "tab\\there");
}

TEST(Echo, CapsLengthAndSaysHowLongItWas) {
  const std::string big(1 << 20, 'x');
  EXPECT_EQ(Echo(big, 4), "xxxx... (1048576 bytes)");
  EXPECT_LT(Echo(big).size(), 300u);
  EXPECT_EQ(Echo("abcd", 4), "abcd");
}

TEST(Echo, InvalidUtf8IsEscapedValidUtf8Kept) {
  EXPECT_EQ(Echo("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(Echo("caf\xc3\xa9"), "caf\xc3\xa9");           // é stays
  EXPECT_EQ(Echo("\xc0\x80"), "\\xc0\\x80");             // overlong NUL
  EXPECT_EQ(Echo("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(Echo("\xe2\x82\xac", 2), "\\xe2\\x82... (3 bytes)");  // cut mid-sequence
}

TEST(Utf8, StrictAsCPythonAndProtobufWantIt) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\x80"));                  // a stray continuation byte
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));              // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x8b\x8d"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));          // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));      // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("ok \xe2\x82"));           // cut short
}

TEST(Utf8, InvalidBytesReplacedValidTextKept) {
  EXPECT_EQ(ValidUtf8("abc \xc3\xa9"), "abc \xc3\xa9");
  EXPECT_EQ(ValidUtf8("a\xff\xfe\n"), "a\xEF\xBF\xBD\xEF\xBF\xBD\n");
  EXPECT_EQ(ValidUtf8("\xe2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // a cut sequence
  EXPECT_TRUE(IsValidUtf8(ValidUtf8("\xed\xa0\x80 \xc0\xaf \x80")));
}

TEST(Echo, MultilineKeepsLineFeedsOnly) {
  EXPECT_EQ(EchoMultiline("Traceback:\n  x\r\x1b]0;t\x07\n", 100),
            "Traceback:\n  x\\r\\x1b]0;t\\x07\n");
  EXPECT_EQ(EchoMultiline(std::string(100, 'y'), 10), "yyyyyyyyyy... (100 bytes)");
}

}  // namespace
// A message's strings made valid UTF-8 for JSON: nested, repeated and
// singular string fields with bad bytes escaped, valid ones and bytes
// fields untouched.
TEST(Utf8Message, InvalidStringsEscapedEverywhereValidOnesKept) {
  google::protobuf::Api api;
  api.set_name("ok-\xc3\xa9");  // valid: é
  api.set_version("v\xff" "1");
  api.add_methods()->set_name("m\xc3");  // a cut sequence
  api.add_methods()->set_name("fine");
  api.add_mixins()->set_root("\xed\xa0\x80");  // a surrogate
  EXPECT_EQ(ReplaceInvalidUtf8(&api), 3);
  EXPECT_EQ(api.name(), "ok-\xc3\xa9");
  EXPECT_EQ(api.version(), "v\\xff1");
  EXPECT_EQ(api.methods(0).name(), "m\\xc3");
  EXPECT_EQ(api.methods(1).name(), "fine");
  EXPECT_EQ(api.mixins(0).root(), "\\xed\\xa0\\x80");
  EXPECT_EQ(ReplaceInvalidUtf8(&api), 0);
  google::protobuf::BytesValue raw;
  raw.set_value("\xff\x00", 2);
  EXPECT_EQ(ReplaceInvalidUtf8(&raw), 0);
  EXPECT_EQ(raw.value(), std::string("\xff\x00", 2));
}

// inspect's report: U+FFFD (its text printer escapes what it prints), map
// keys and values too (the start environment is a map).
TEST(Utf8Message, ReplacementCharacterModeReachesMapKeysAndValues) {
  google::protobuf::Struct st;
  (*st.mutable_fields())["K\xff"].set_string_value("v\xfe\n");
  (*st.mutable_fields())["ok"].set_string_value("line\n");
  EXPECT_EQ(ReplaceInvalidUtf8(&st, Utf8Fix::kReplacement), 2);
  ASSERT_EQ(st.fields().count("K\xEF\xBF\xBD"), 1u);
  EXPECT_EQ(st.fields().at("K\xEF\xBF\xBD").string_value(), "v\xEF\xBF\xBD\n");
  EXPECT_EQ(st.fields().at("ok").string_value(), "line\n");  // valid: kept, LF and all
}

}  // namespace rsslab
