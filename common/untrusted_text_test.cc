#include "common/untrusted_text.h"

#include <string>

#include "absl/strings/str_cat.h"
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

// Valid UTF-8 that reorders or hides the text around it: each is shown as
// \uNNNN, so "\u202egnp.exe" cannot read "exe.png" in a report.
TEST(Echo, BidiAndInvisibleControlsAreEscaped) {
  const struct {
    const char* utf8;
    const char* shown;
  } cases[] = {
      {"\xd8\x9c", "\\u061c"},      // ARABIC LETTER MARK
      {"\xe2\x80\x8e", "\\u200e"},  // LEFT-TO-RIGHT MARK
      {"\xe2\x80\x8f", "\\u200f"},  // RIGHT-TO-LEFT MARK
      {"\xe2\x80\xa8", "\\u2028"},  // LINE SEPARATOR
      {"\xe2\x80\xa9", "\\u2029"},  // PARAGRAPH SEPARATOR
      {"\xe2\x80\xaa", "\\u202a"},  // LEFT-TO-RIGHT EMBEDDING
      {"\xe2\x80\xab", "\\u202b"},  // RIGHT-TO-LEFT EMBEDDING
      {"\xe2\x80\xac", "\\u202c"},  // POP DIRECTIONAL FORMATTING
      {"\xe2\x80\xad", "\\u202d"},  // LEFT-TO-RIGHT OVERRIDE
      {"\xe2\x80\xae", "\\u202e"},  // RIGHT-TO-LEFT OVERRIDE
      {"\xe2\x81\xa6", "\\u2066"},  // LEFT-TO-RIGHT ISOLATE
      {"\xe2\x81\xa7", "\\u2067"},  // RIGHT-TO-LEFT ISOLATE
      {"\xe2\x81\xa8", "\\u2068"},  // FIRST STRONG ISOLATE
      {"\xe2\x81\xa9", "\\u2069"},  // POP DIRECTIONAL ISOLATE
      {"\xc2\x80", "\\u0080"},       // C1 controls: the first,
      {"\xc2\x9b", "\\u009b"},       // CSI,
      {"\xc2\x9f", "\\u009f"},       // the last
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Echo(absl::StrCat("a", c.utf8, "b")), absl::StrCat("a", c.shown, "b")) << c.shown;
    EXPECT_EQ(EchoMultiline(absl::StrCat(c.utf8, "\n"), 100), absl::StrCat(c.shown, "\n"));
  }
  // Neighbours stay as they are: U+00A0, U+200D (emoji sequences), U+2030, U+2065, U+206A.
  for (const char* kept : {"\xc2\xa0", "\xe2\x80\x8d", "\xe2\x80\xb0", "\xe2\x81\xa5",
                           "\xe2\x81\xaa"}) {
    EXPECT_EQ(Echo(kept), kept);
  }
  EXPECT_EQ(Echo("thread-\xe2\x80\xaegnp.exe"), "thread-\\u202egnp.exe");
}

TEST(Echo, JsonKeepsItsValuesWithInvisibleControlsEscaped) {
  EXPECT_EQ(JsonInvisibleEscaped("{\"comm\":\"\xe2\x81\xa6" "a\xd8\x9c" "b\xc2\x85 \xc3\xa9\"}"),
            "{\"comm\":\"\\u2066a\\u061cb\\u0085 \xc3\xa9\"}");
  EXPECT_EQ(JsonInvisibleEscaped("{\"a\":\"\\u202e\"}"), "{\"a\":\"\\u202e\"}");  // already escaped
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
