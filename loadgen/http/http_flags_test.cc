#include "loadgen/http/http_flags.h"

#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, http_version);
ABSL_DECLARE_FLAG(uint32_t, connections);
ABSL_DECLARE_FLAG(std::string, body);

namespace rsslab {
namespace http {
namespace {

using ::testing::HasSubstr;

class HttpFlags : public ::testing::Test {
 protected:
  void TearDown() override {
    absl::SetFlag(&FLAGS_http_version, "");
    absl::SetFlag(&FLAGS_connections, 0);
    absl::SetFlag(&FLAGS_body, "");
  }
};

TEST_F(HttpFlags, ConnectionsSetChannelsAndHttp11Concurrency) {
  absl::SetFlag(&FLAGS_connections, 8);
  rsslab::v1::LoadSpec flags;
  ASSERT_TRUE(ApplyHttpFlags("http://h:1/", &flags).ok());
  EXPECT_EQ(flags.channels(), 8u);
  EXPECT_EQ(flags.concurrency(), 8u);  // one in flight per connection
}

TEST_F(HttpFlags, ChannelsCountAsConnectionsOnHttp11) {
  rsslab::v1::LoadSpec flags;
  flags.set_channels(6);
  ASSERT_TRUE(ApplyHttpFlags("http://h:1/", &flags).ok());
  EXPECT_EQ(flags.channels(), 6u);
  EXPECT_EQ(flags.concurrency(), 6u);
}

TEST_F(HttpFlags, H2cKeepsItsConcurrencyAndOpenLoopIsLeftAlone) {
  absl::SetFlag(&FLAGS_http_version, "h2c");
  absl::SetFlag(&FLAGS_connections, 2);
  rsslab::v1::LoadSpec flags;
  ASSERT_TRUE(ApplyHttpFlags("http://h:1/", &flags).ok());
  EXPECT_EQ(flags.channels(), 2u);
  EXPECT_EQ(flags.concurrency(), 0u);  // the plan's default (64)
  absl::SetFlag(&FLAGS_http_version, "");
  rsslab::v1::LoadSpec open;
  open.set_rate(100);
  ASSERT_TRUE(ApplyHttpFlags("http://h:1/", &open).ok());
  EXPECT_EQ(open.concurrency(), 0u);
}

TEST_F(HttpFlags, HttpFlagsNeedAnHttpTarget) {
  absl::SetFlag(&FLAGS_connections, 2);
  absl::SetFlag(&FLAGS_body, "x");
  rsslab::v1::LoadSpec flags;
  absl::Status s = ApplyHttpFlags("127.0.0.1:50051", &flags);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("--connections, --body: HTTP load only; give an HTTP server as "
                        "--target=http://HOST:PORT/PATH"));
  flags.set_channels(3);
  s = ApplyHttpFlags("http://h:1/", &flags);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--connections and --channels both set"));
}

TEST_F(HttpFlags, TargetOnlyForHttpUrls) {
  absl::StatusOr<std::shared_ptr<const Target>> t = LoadHttpFlags("127.0.0.1:50051", {});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, nullptr);
  t = LoadHttpFlags("http://h:1/x", {"rsslab_loadgen", "--header=A: 1, 2", "--header=B: {{seq}}"});
  ASSERT_TRUE(t.ok()) << t.status();
  Request r;
  (*t)->Build(3, 1, &r);
  ASSERT_EQ(r.headers.size(), 2u);
  EXPECT_EQ(r.headers[0], "A: 1, 2");  // each occurrence whole, commas kept
  EXPECT_EQ(r.headers[1], "B: 3");
}

}  // namespace
}  // namespace http
}  // namespace rsslab
