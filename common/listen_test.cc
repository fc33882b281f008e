#include "common/listen.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

TEST(Listen, ParsesHostPortForms) {
  auto v4 = ParseHostPort("127.0.0.1:50051");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 50051);
  auto v6 = ParseHostPort("[::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
}

TEST(Listen, RefusesMalformedAddresses) {
  for (const char* bad : {"", "127.0.0.1", ":50051", "host:", "host:port", "host:-1",
                          "host:65536", "[::1:5", "[::1]50051"}) {
    EXPECT_FALSE(ParseHostPort(bad).ok()) << "'" << bad << "'";
  }
}

TEST(Listen, LoopbackIsOnly127And1AndLocalhost) {
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("127.1.2.3"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("10.0.0.1"));
  EXPECT_FALSE(IsLoopback("::"));
  EXPECT_FALSE(IsLoopback("128.0.0.1"));
}

TEST(Listen, JoinBracketsIpv6) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 1), "127.0.0.1:1");
  EXPECT_EQ(JoinHostPort("::1", 2), "[::1]:2");
}

TEST(Listen, ATakenPortIsNamedInTheError) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string addr = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  absl::Status s = CheckBindable(addr);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), addr)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "in use")) << s;
  close(fd);
  EXPECT_TRUE(CheckBindable(addr).ok());  // free again once closed
  EXPECT_TRUE(CheckBindable("127.0.0.1:0").ok());
}

}  // namespace
}  // namespace rsslab
