#include "loadgen/sweep/agents_list.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Err(absl::string_view text, char sep = '\n') {
  auto a = ParseAgentList(text, sep, "f");
  EXPECT_FALSE(a.ok());
  return a.ok() ? "" : std::string(a.status().message());
}

// Hardening class 1 (docs/RELIABILITY.md): entries of 16 or more characters were views of a freed
// temporary (heap garbage dialled); a 1 MB line crashed the loadgen.
TEST(AgentList, LongEntriesCommentsAndSpacesAreReadExactly) {
  auto a = ParseAgentList(
      "# agents\n  agent-host-number-one.example:50060   # rack 1\n\n10.0.0.2:50060\n", '\n', "f");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(*a, ElementsAre("agent-host-number-one.example:50060", "10.0.0.2:50060"));
  auto b = ParseAgentList("10.0.0.1:1, 10.0.0.2:2", ',', "--agent");
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(*b, ElementsAre("10.0.0.1:1", "10.0.0.2:2"));
}

TEST(AgentList, BadEntriesAreOneLineErrors) {
  EXPECT_THAT(Err("a:1\n" + std::string(1 << 20, 'x') + "\n"), HasSubstr("f:2: an entry of"));
  EXPECT_THAT(Err("nocolon\n"), HasSubstr("is not HOST:PORT"));
  EXPECT_THAT(Err("a:1\x1b[2J\n"), HasSubstr("\\x1b[2J"));
  EXPECT_THAT(Err("a-very-long-agent-name:1\na-very-long-agent-name:1\n"),
              HasSubstr("agent a-very-long-agent-name:1 is listed twice"));
  std::string many;
  for (int i = 0; i < 300; ++i) many += "h" + std::to_string(i) + ":1\n";
  EXPECT_THAT(Err(many), HasSubstr("more than 256"));
}

TEST(AgentList, FileGoesThroughTheBoundedReader) {
  auto z = ReadAgentsFile("/dev/zero");
  ASSERT_FALSE(z.ok());
  EXPECT_THAT(std::string(z.status().message()), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace rsslab
