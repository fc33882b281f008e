#include "common/host_info.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(HostInfoTest, CpuListsAndSplits) {
  EXPECT_THAT(*ParseCpuList("0-2,5"), ElementsAre(0, 1, 2, 5));
  EXPECT_EQ(FormatCpuList({0, 1, 2, 5}), "0-2,5");
  EXPECT_FALSE(ParseCpuList("a").ok());
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  auto split = ChooseCpus("", "", {0, 1, 2, 3});
  ASSERT_TRUE(split.ok());
  EXPECT_THAT(split->server, ElementsAre(0, 1));
  EXPECT_THAT(split->loadgen, ElementsAre(2, 3));
  EXPECT_TRUE(ChooseCpus("", "", {0})->server.empty());
  EXPECT_THAT(ChooseCpus("0", "0", {0, 1}).status().message(), HasSubstr("share CPU 0"));
  EXPECT_THAT(ChooseCpus("0", "", {0, 1}).status().message(), HasSubstr("go together"));
  EXPECT_THAT(ChooseCpus("0", "7", {0, 1}).status().message(),
              HasSubstr("CPU 7 is not one this process may use"));
  const HostFacts h = CurrentHost();
  EXPECT_FALSE(h.hostname.empty());
  EXPECT_FALSE(h.kernel.empty());
  EXPECT_GT(h.cpus, 0);
  EXPECT_GT(h.mem_total_bytes, 0);
  EXPECT_FALSE(AllowedCpus().empty());
}

}  // namespace
}  // namespace rsslab
