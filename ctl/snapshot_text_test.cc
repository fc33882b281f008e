#include "ctl/snapshot_text.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;

// Third pass: strings a server reports (thread names from /proc, the
// allocator's texts, a trim's notes) were printed raw by `rsslab_ctl`, so a
// process could forge lines of the report or drive the terminal, and
// `--json` logged protobuf's "invalid UTF-8" errors. Now every such string
// is escaped in the text and made valid UTF-8 in the JSON.
rsslab::v1::Snapshot Hostile() {
  rsslab::v1::Snapshot s;
  s.set_phase("fill\nphase forged");
  s.set_allocator("glibc\x1b[2J");
  (*s.mutable_allocator_env())["MALLOC_ARENA_MAX"] = "2\r\nalloc    forged";
  auto* t = s.add_thread_names();
  t->set_comm("rsslab-w0\x1b]0;pwned\x07");
  t->set_count(3);
  auto* bad = s.add_thread_names();
  bad->set_comm("bad\xff\xfe");
  bad->set_count(1);
  s.mutable_workers()->set_thread_mode("fixed\n");
  s.mutable_last_trim()->set_allocator("glibc");
  s.mutable_last_trim()->set_call("malloc_trim(0)\nfreed 999 MiB");
  return s;
}

TEST(SnapshotText, PeerStringsAreEscaped) {
  const rsslab::v1::Snapshot s = Hostile();
  for (const std::string& out : {SnapshotText(s), SnapshotLine(s), TrimText(s.last_trim())}) {
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
    EXPECT_EQ(out.find("\nphase forged"), std::string::npos) << out;
    EXPECT_EQ(out.find("\nalloc    forged"), std::string::npos) << out;
    EXPECT_EQ(out.find("\nfreed 999"), std::string::npos) << out;
  }
  const std::string text = SnapshotText(s);
  EXPECT_THAT(text, HasSubstr("phase fill\\nphase forged"));
  EXPECT_THAT(text, HasSubstr("rsslab-w0\\x1b]0;pwned\\x07x3"));
  EXPECT_THAT(text, HasSubstr("bad\\xff\\xfex1"));
  EXPECT_THAT(text, HasSubstr("alloc    glibc\\x1b[2J"));
}

// PrintJsonLine writes to stdout: captured through a pipe, with stderr
// captured too (where protobuf would log).
TEST(SnapshotText, JsonIsValidUtf8WithoutProtobufLogs) {
  int out[2], err[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  fflush(stdout);
  fflush(stderr);
  const int saved_out = dup(1), saved_err = dup(2);
  dup2(out[1], 1);
  dup2(err[1], 2);
  PrintJsonLine(Hostile());
  fflush(stdout);
  fflush(stderr);
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(out[1]);
  close(err[1]);
  auto drain = [](int fd) {
    std::string s;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) s.append(buf, static_cast<size_t>(n));
    close(fd);
    return s;
  };
  const std::string json = drain(out[0]), logs = drain(err[0]);
  EXPECT_THAT(json, HasSubstr("\"comm\":\"bad\\\\xff\\\\xfe\""));
  EXPECT_EQ(json.find('\xff'), std::string::npos) << json;
  EXPECT_EQ(logs, "") << logs;
}

}  // namespace
}  // namespace rsslab
