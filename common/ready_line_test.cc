#include "common/ready_line.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(ReadyLine, FormatThenParseRoundTrips) {
  ReadyLine in{"127.0.0.1:50051", "127.0.0.1:50052", 4242, "127.0.0.1:9100"};
  std::string line = FormatReadyLine(in);
  EXPECT_EQ(line,
            "rsslab_server ready data=127.0.0.1:50051 control=127.0.0.1:50052 pid=4242 "
            "metrics=127.0.0.1:9100");
  ASSERT_TRUE(IsReadyLine(line));
  absl::StatusOr<ReadyLine> out = ParseReadyLine(line);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->data_address, in.data_address);
  EXPECT_EQ(out->control_address, in.control_address);
  EXPECT_EQ(out->pid, in.pid);
  EXPECT_EQ(out->metrics_address, in.metrics_address);
}

TEST(ReadyLine, WithoutMetricsHasNoMetricsField) {
  std::string line = FormatReadyLine({"[::1]:1", "[::1]:2", 7, ""});
  EXPECT_EQ(line, "rsslab_server ready data=[::1]:1 control=[::1]:2 pid=7");
  EXPECT_TRUE(ParseReadyLine(line).ok());
}

TEST(ReadyLine, RefusesMissingFieldsAndOtherLines) {
  EXPECT_FALSE(IsReadyLine("rsslab_server starting"));
  EXPECT_FALSE(ParseReadyLine("hello data=a:1 control=b:2 pid=3").ok());
  EXPECT_FALSE(ParseReadyLine("rsslab_server ready data=a:1 pid=3").ok());
  EXPECT_FALSE(ParseReadyLine("rsslab_server ready data=a:1 control=b:2 pid=0").ok());
  EXPECT_FALSE(ParseReadyLine("rsslab_server ready data=a:1 control=b:2 pid=x").ok());
  // Strict pids: what SimpleAtoi would read as 16 or 5 is malformed.
  EXPECT_FALSE(ParseReadyLine("rsslab_server ready data=a:1 control=b:2 pid=0x10").ok());
  EXPECT_FALSE(ParseReadyLine("rsslab_server ready data=a:1 control=b:2 pid=+5").ok());
}

}  // namespace
}  // namespace rsslab
