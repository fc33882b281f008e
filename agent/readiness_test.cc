#include "agent/readiness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace rsslab {
namespace launch {
namespace {

TEST(LineMatchTest, PrefixMatchesOnlyAtTheStart) {
  LineMatch m = LineMatch::Prefix("rsslab_server ready ");
  EXPECT_TRUE(m.Matches("rsslab_server ready data=1:2"));
  EXPECT_FALSE(m.Matches("x rsslab_server ready data=1:2"));
  EXPECT_FALSE(m.HasGroup("control"));
  EXPECT_EQ(m.Describe(), "a line starting with \"rsslab_server ready \"");
}

TEST(LineMatchTest, RegexIsSearchedAndAnchorable) {
  absl::StatusOr<LineMatch> m = LineMatch::Regex("serving on [0-9]+");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->Matches("INFO 12:00 serving on 8080"));
  EXPECT_FALSE(m->Matches("serving on port"));
  absl::StatusOr<LineMatch> a = LineMatch::Regex("^ready$");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->Matches("ready"));
  EXPECT_FALSE(a->Matches("not ready"));
  EXPECT_EQ(a->Describe(), "a line matching /^ready$/");
}

TEST(LineMatchTest, NamedGroup) {
  absl::StatusOr<LineMatch> m = LineMatch::Regex(R"(^shop ready .*control=(?P<control>\S+))");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->HasGroup("control"));
  EXPECT_EQ(m->Group("shop ready data=1:2 control=127.0.0.1:4000 pid=7", "control"),
            "127.0.0.1:4000");
  EXPECT_EQ(m->Group("other line", "control"), "");
  EXPECT_EQ(m->Group("shop ready control=x", "nosuch"), "");
}

TEST(LineMatchTest, BadRegexIsOneLine) {
  absl::StatusOr<LineMatch> m = LineMatch::Regex("ready (");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(m.status().message()).find('\n'), std::string::npos);
}

TEST(LineMatchTest, EmptyMatchesNothing) {
  LineMatch m;
  EXPECT_TRUE(m.empty());
  EXPECT_FALSE(m.Matches(""));
  EXPECT_FALSE(m.Matches("anything"));
}

TEST(PortAcceptsTest, ListeningThenClosed) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  // Bound but not listening: refused.
  EXPECT_FALSE(PortAccepts("127.0.0.1", port, absl::Milliseconds(200)));
  ASSERT_EQ(listen(fd, 4), 0);
  EXPECT_TRUE(PortAccepts("127.0.0.1", port, absl::Milliseconds(200)));
  close(fd);
  EXPECT_FALSE(PortAccepts("127.0.0.1", port, absl::Milliseconds(200)));
  EXPECT_FALSE(PortAccepts("not-an-address", port, absl::Milliseconds(200)));
}

}  // namespace
}  // namespace launch
}  // namespace rsslab
