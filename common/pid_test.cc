// The strict pid parser: what strtol and absl::SimpleAtoi let through
// (" 5", "0x10", "+5", "-3", "5\n") is refused with one line naming the input.
#include "common/pid.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(PidTest, DecimalDigitsWithinTheLimitAreAccepted) {
  EXPECT_EQ(*ParsePid("1", "--pid", 4194304), 1);
  EXPECT_EQ(*ParsePid("4242", "--pid", 4194304), 4242);
  EXPECT_EQ(*ParsePid("4194303", "--pid", 4194304), 4194303);
  EXPECT_EQ(*ParsePid("0005", "--pid", 100), 5);  // leading zeros are still decimal
  EXPECT_EQ(*ParsePid("000000000042", "--pid", 100), 42);
}

TEST(PidTest, WhatLenientParsersTakeIsRefused) {
  for (const char* bad : {" 5", "5 ", "\t5", "5\n", "+5", "-3", "0x10", "0X10", "1e3", "5.0",
                          "٥", "5\x1b[2J", "", "abc", "0"}) {
    absl::StatusOr<int> p = ParsePid(bad, "--pid", 4194304);
    ASSERT_FALSE(p.ok()) << "'" << bad << "' gave " << *p;
    EXPECT_TRUE(absl::IsInvalidArgument(p.status()));
    const std::string m(p.status().message());
    EXPECT_TRUE(absl::StartsWith(m, "--pid: ")) << m;
    EXPECT_FALSE(absl::StrContains(m, "\n")) << m;
    EXPECT_FALSE(absl::StrContains(m, "\x1b")) << m;
  }
  EXPECT_TRUE(absl::StrContains(ParsePid("0x10", "--pid", 100).status().message(),
                                "decimal digits only"));
}

TEST(PidTest, AboveTheKernelsLimitIsRefused) {
  EXPECT_TRUE(ParsePid("32767", "--pid", 32768).ok());
  EXPECT_TRUE(absl::StrContains(ParsePid("32768", "--pid", 32768).status().message(),
                                "not below the kernel's pid_max (32768)"));
  EXPECT_TRUE(absl::StrContains(ParsePid("99999999999999999999999", "--pid", 32768).status().message(),
                                "not below the kernel's pid_max"));
  // Any length is bounded: a megabyte of digits is one short line.
  absl::StatusOr<int> huge = ParsePid(std::string(1 << 20, '9'), "--pid", 32768);
  ASSERT_FALSE(huge.ok());
  EXPECT_LT(huge.status().message().size(), 200u);
  EXPECT_TRUE(absl::StrContains(huge.status().message(), "pid_max")) << huge.status();
}

TEST(PidTest, TheRunningKernelsLimitIsRead) {
  const int max = PidMax();
  EXPECT_GE(max, 2);
  EXPECT_LE(max, kPidLimit);
  EXPECT_TRUE(ParsePid(std::to_string(max - 1), "--pid").ok());
  EXPECT_FALSE(ParsePid(std::to_string(max), "--pid").ok());
}

}  // namespace
}  // namespace rsslab
