#include "loadgen/call_flags.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;

std::string Error(const std::string& item) {
  auto md = ParseMetadata({item});
  return md.ok() ? "accepted" : std::string(md.status().message());
}

// Third pass: te, host, content-type and upper-case keys were sent as
// given. Now each key is checked against HTTP/2's and gRPC's rules, one line
// naming the entry and the rule.
TEST(Metadata, KeysFollowHttp2AndGrpcRules) {
  EXPECT_THAT(Error("X-Team:blue"), HasSubstr("HTTP/2 header names are lower-case (x-team)"));
  EXPECT_THAT(Error(":authority:evil"), HasSubstr("pseudo-headers"));
  EXPECT_THAT(Error(":path:/x"), HasSubstr("pseudo-headers"));
  for (const char* k : {"te", "host", "content-type", "content-length", "user-agent", "connection",
                        "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}) {
    EXPECT_THAT(Error(std::string(k) + ":x"),
                HasSubstr(std::string("'") + k + "' is reserved by HTTP/2 or set by gRPC"));
  }
  EXPECT_THAT(Error("grpc-timeout:1S"), HasSubstr("grpc-* keys are reserved by gRPC"));
  EXPECT_THAT(Error("x team:1"), HasSubstr("keys are lower-case letters, digits"));
  EXPECT_THAT(Error("x/y:1"), HasSubstr("keys are lower-case letters, digits"));
  EXPECT_THAT(Error("novalue"), HasSubstr("want key:value"));
  EXPECT_THAT(Error("x-a:b\x1b[2J"), HasSubstr("values are printable ASCII"));
  // The entry is echoed escaped: no raw ESC or newline in the message.
  EXPECT_THAT(Error("X\x1b[31m:v\n"), HasSubstr("X\\x1b[31m"));
  EXPECT_EQ(Error("X\x1b[31m:v\n").find('\x1b'), std::string::npos);
  for (const std::string& e : {Error("TE:x"), Error("x-bin:not base64!")}) {
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(Metadata, BinKeysTakeBase64AndOthersPass) {
  auto md = ParseMetadata({"authorization:Bearer abc", "x-trace-bin:AAH/", "x.v_2-a:  v,w"});
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_THAT(*md, ::testing::ElementsAre(Pair("authorization", "Bearer abc"),
                                          Pair("x-trace-bin", std::string("\x00\x01\xff", 3)),
                                          Pair("x.v_2-a", "v,w")));
  EXPECT_THAT(Error("x-trace-bin:not base64!"), HasSubstr("a -bin key's value is binary, given in base64"));
  EXPECT_THAT(Error("x-bin:\x01"), HasSubstr("base64"));
}

}  // namespace
}  // namespace rsslab
