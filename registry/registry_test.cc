#include "registry/registry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/procfs/procfs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace registry {
namespace {

using ::testing::HasSubstr;

uint64_t StartTicks(int pid) {
  absl::StatusOr<std::string> stat = procfs::ReadProcFile(pid, "stat");
  procfs::ThreadView v;
  EXPECT_TRUE(stat.ok() && procfs::ParseThreadStat(absl::StripAsciiWhitespace(*stat), &v));
  return v.start_ticks;
}

std::string Text(int pid, uint64_t start, const std::string& service = "shop",
                 const std::string& address = "127.0.0.1:41234") {
  return absl::StrCat(address, "\nservice=", service, "\npid=", pid, "\nstart=", start, "\n");
}

// A socket listening on 127.0.0.1:`port` (0: any free one); -1 on failure.
int Listen(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

int PortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/registry_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    (void)system(absl::StrCat("rm -rf '", dir_, "'").c_str());
  }
  std::string Write(int pid, const std::string& text) {
    const std::string path = EntryPath(dir_, pid);
    std::ofstream(path) << text;
    return path;
  }
  // The one ignored line naming `path`, or "".
  static std::string Why(const Listing& l, const std::string& path) {
    for (const Ignored& i : l.ignored) {
      if (i.path == path) return i.why;
    }
    return "";
  }
  std::string dir_;
};

TEST_F(RegistryTest, ParsesTheFourLinesAndIgnoresNewerKeys) {
  absl::StatusOr<Entry> e = ParseEntry("127.0.0.1:5\nservice=a.b-c_9\npid=12\nstart=34\nnew=x\n", 12);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->address, "127.0.0.1:5");
  EXPECT_EQ(e->service, "a.b-c_9");
  EXPECT_EQ(e->pid, 12);
  EXPECT_EQ(e->start_ticks, 34u);
}

TEST_F(RegistryTest, AMetricsLineNamesTheWorkersOwnEndpoint) {
  absl::StatusOr<Entry> e =
      ParseEntry("127.0.0.1:5\nservice=a\npid=12\nstart=34\nmetrics=127.0.0.1:9464\n", 12);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->metrics_address, "127.0.0.1:9464");
  e = ParseEntry("127.0.0.1:5\nservice=a\npid=12\nstart=34\n", 12);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->metrics_address, "");
  e = ParseEntry("127.0.0.1:5\nservice=a\npid=12\nstart=34\nmetrics=x\n", 12);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("metrics= x is not HOST:PORT"));
}

TEST_F(RegistryTest, ListAllFindsEveryServicesWorkers) {
  const int me = getpid();
  const pid_t child = fork();
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  Write(me, Text(me, StartTicks(me), "shop"));
  Write(child, Text(child, StartTicks(child), "cart"));
  Write(child + 100000, Text(child + 100000, 1, "cart"));  // stale: no such pid
  Listing l = ListAll({dir_}, Trust::Self(), /*clean=*/false);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_EQ(l.workers.size(), 2u);
  EXPECT_EQ(l.workers[0].service, me < child ? "shop" : "cart");
  EXPECT_EQ(l.workers[1].service, me < child ? "cart" : "shop");
  EXPECT_EQ(l.ignored.size(), 1u);
  EXPECT_TRUE(ListService("", {dir_}, Trust::Self(), false).workers.empty());
}

TEST_F(RegistryTest, MalformedEntriesAreNamedInOneLine) {
  struct Case {
    std::string text;
    std::string why;
  } cases[] = {
      {"127.0.0.1:5\n", "written by an older rsslab package"},  // the one-line format
      {"127.0.0.1:5\nservice=a\npid=12\nstart=34", "no final newline"},
      {"nohost\nservice=a\npid=12\nstart=34\n", "not HOST:PORT"},
      {"h:70000\nservice=a\npid=12\nstart=34\n", "not HOST:PORT"},
      {"h:5\nservice=a b\npid=12\nstart=34\n", "must be 1 to 64 characters"},
      {"h:5\nservice=\x1b[2J\npid=12\nstart=34\n", "\\x1b"},
      {absl::StrCat("h:5\nservice=", std::string(65, 'a'), "\npid=12\nstart=34\n"), "1 to 64"},
      {"h:5\nservice=a\npid= 12\nstart=34\n", "not a process id"},
      {"h:5\nservice=a\npid=13\nstart=34\n", "the file name says 12"},
      {"h:5\nservice=a\npid=12\nstart=-1\n", "not a number of clock ticks"},
      {"h:5\nservice=a\npid=12\nstart=34\njunk\n", "line 5 is not key=value"},
      {absl::StrCat("h:5\nservice=a\npid=12\nstart=34\n", std::string(20, '\n')), "more than 16 lines"},
      {std::string(600, 'x'), "larger than 512 bytes"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Entry> e = ParseEntry(c.text, 12);
    ASSERT_FALSE(e.ok()) << c.text;
    EXPECT_THAT(std::string(e.status().message()), HasSubstr(c.why)) << c.text;
    EXPECT_FALSE(absl::StrContains(e.status().message(), "\n")) << e.status();
  }
}

TEST_F(RegistryTest, ALiveEntryIsListedOnceAcrossDirectories) {
  const int me = getpid();
  Write(me, Text(me, StartTicks(me)));
  Listing l = ListService("shop", {dir_, dir_}, Trust::Self(), true);
  ASSERT_EQ(l.workers.size(), 1u);
  EXPECT_EQ(l.workers[0].pid, me);
  EXPECT_EQ(l.workers[0].address, "127.0.0.1:41234");
  EXPECT_TRUE(l.ignored.empty());
  EXPECT_TRUE(ListService("other", {dir_}, Trust::Self(), true).workers.empty());
  absl::StatusOr<Entry> one = FindPid(me, {dir_}, Trust::Self());
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(WorkerName(*one), absl::StrCat("pid ", me, " at 127.0.0.1:41234"));
}

TEST_F(RegistryTest, ADeadPidIsStaleAndCleaned) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  const uint64_t start = StartTicks(child);  // may already be gone: then 0
  waitpid(child, nullptr, 0);
  const std::string path = Write(child, Text(child, start));
  Listing l = ListService("shop", {dir_}, Trust::Self(), /*clean=*/false);
  EXPECT_TRUE(l.workers.empty());
  EXPECT_THAT(Why(l, path), HasSubstr(absl::StrCat("stale: pid ", child, " is gone")));
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << "kept without clean";
  l = ListService("shop", {dir_}, Trust::Self(), /*clean=*/true);
  ASSERT_EQ(l.ignored.size(), 1u);
  EXPECT_TRUE(l.ignored[0].removed);
  EXPECT_NE(stat(path.c_str(), &st), 0) << "removed with clean";
  EXPECT_THAT(std::string(FindPid(child, {dir_}, Trust::Self()).status().message()),
              HasSubstr("no live Control entry"));
  // A malformed entry (an older package's one line) of a gone pid is stale
  // too: cleaned, not said; of a live pid it is named.
  const std::string old_format = Write(child, "127.0.0.1:5\n");
  const std::string live_old = Write(getpid(), "127.0.0.1:5\n");
  l = ListService("shop", {dir_}, Trust::Self(), true);
  EXPECT_EQ(Why(l, old_format), "");
  EXPECT_NE(stat(old_format.c_str(), &st), 0);
  EXPECT_THAT(Why(l, live_old), HasSubstr("written by an older rsslab package"));
}

TEST_F(RegistryTest, AnotherStartTimeIsAReusedPid) {
  const int me = getpid();
  const std::string path = Write(me, Text(me, StartTicks(me) + 1));
  Listing l = ListService("shop", {dir_}, Trust::Self(), /*clean=*/true);
  EXPECT_TRUE(l.workers.empty());
  EXPECT_THAT(Why(l, path), HasSubstr("(a reused pid)"));
  // Another service's stale entry is cleaned too, but not said.
  const std::string other = Write(1, Text(1, 1, "other"));
  l = ListService("shop", {dir_}, Trust::Self(), true);
  EXPECT_EQ(Why(l, other), "");
}

TEST_F(RegistryTest, SizeSymlinksAndCountAreBounded) {
  const int me = getpid();
  const std::string big = Write(me, Text(me, StartTicks(me)) + std::string(600, '#'));
  Listing l = ListService("shop", {dir_}, Trust::Self(), true);
  EXPECT_TRUE(l.workers.empty());
  EXPECT_THAT(Why(l, big), HasSubstr("larger than 512 bytes"));
  unlink(big.c_str());
  const std::string real = absl::StrCat(dir_, "/real");
  std::ofstream(real) << Text(me, StartTicks(me));
  ASSERT_EQ(symlink(real.c_str(), EntryPath(dir_, me).c_str()), 0);
  l = ListService("shop", {dir_}, Trust::Self(), true);
  EXPECT_TRUE(l.workers.empty());
  EXPECT_THAT(Why(l, EntryPath(dir_, me)), HasSubstr("symlink"));
  for (int pid = 2; pid < kMaxFilesPerDir + 10; ++pid) Write(pid, "x\n");
  l = ListService("shop", {dir_}, Trust::Self(), false);
  EXPECT_THAT(Why(l, dir_), HasSubstr("more than 1024 entries: the rest not read"));
  EXPECT_LE(l.ignored.size(), static_cast<size_t>(kMaxFilesPerDir + 1));
}

TEST_F(RegistryTest, TrustNamesUsersByNameOrUid) {
  Trust self = Trust::Self();
  ASSERT_EQ(self.uids.size(), 1u);
  EXPECT_EQ(self.uids[0], static_cast<int>(geteuid()));
  absl::StatusOr<Trust> t = TrustUsers({"root", "0", "4242"});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->Has(0));
  EXPECT_TRUE(t->Has(4242));
  EXPECT_FALSE(t->Has(4243));
  EXPECT_FALSE(t->Has(-1));
  EXPECT_THAT(std::string(TrustUsers({"no-such-user-rsslab"}).status().message()),
              HasSubstr("--as_user: no user named 'no-such-user-rsslab'"));
  EXPECT_THAT(std::string(TrustUsers({""}).status().message()),
              HasSubstr("not a user name or uid"));
  EXPECT_THAT(std::string(TrustUsers({"4294967295"}).status().message()),
              HasSubstr("out of range"));
  EXPECT_THAT(std::string(TrustUsers(std::vector<std::string>(kMaxTrustedUsers + 1, "0"))
                              .status()
                              .message()),
              HasSubstr("more than 32 users"));
  // The rule itself: the file's and the process's owner, one uid, trusted.
  Trust only_4242{{4242}};
  EXPECT_TRUE(CheckTrusted(only_4242, 7, 4242, 4242).ok());
  EXPECT_TRUE(CheckTrusted(only_4242, 7, 4242, -1).ok());
  EXPECT_THAT(std::string(CheckTrusted(only_4242, 7, 4243, 4242).message()),
              HasSubstr("pid 7's entry is owned by uid 4243, not trusted; pass --as_user=4243"));
  EXPECT_THAT(std::string(CheckTrusted(only_4242, 7, 4242, 0).message()),
              HasSubstr("pid 7 is owned by uid 0 (root), not trusted; pass --as_user=root"));
  EXPECT_THAT(std::string(CheckTrusted(Trust{{0, 4242}}, 7, 4242, 0).message()),
              HasSubstr("pid 7 runs as uid 0, but its entry is owned by uid 4242"));
}

// As root: entries of another user (nobody) are believed only when named,
// whoever reads them, and are never removed.
TEST_F(RegistryTest, AnotherUsersEntryIsTrustedOnlyWhenNamed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (chown, setuid) to make another user's entry";
  struct passwd* pw = getpwnam("nobody");
  ASSERT_NE(pw, nullptr) << "no user nobody";
  const uid_t nobody = pw->pw_uid;
  const gid_t nogroup = pw->pw_gid;
  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    close(hold[1]);
    if (setgroups(0, nullptr) != 0 || setgid(nogroup) != 0 || setuid(nobody) != 0) _exit(1);
    (void)!write(ready[1], "r", 1);
    char c;
    (void)!read(hold[0], &c, 1);  // until the parent closes its end
    _exit(0);
  }
  ASSERT_GT(child, 0);
  close(ready[1]);
  close(hold[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1) << "the child could not become nobody";
  const std::string path = Write(child, Text(child, StartTicks(child)));
  // Written by root, but the process is nobody's: not for root by default.
  Listing l = ListService("shop", {dir_}, Trust::Self(), true);
  EXPECT_TRUE(l.workers.empty());
  EXPECT_THAT(Why(l, path),
              HasSubstr(absl::StrCat("pid ", child, " is owned by uid ", nobody,
                                     " (nobody), not trusted; pass --as_user=nobody")));
  // Written by nobody (as the package does): still not believed by root.
  ASSERT_EQ(chown(path.c_str(), nobody, nogroup), 0);
  l = ListService("shop", {dir_}, Trust::Self(), true);
  EXPECT_TRUE(l.workers.empty());
  EXPECT_THAT(Why(l, path), HasSubstr(absl::StrCat("pid ", child, "'s entry is owned by uid ",
                                                   nobody, " (nobody), not trusted")));
  EXPECT_THAT(std::string(FindPid(child, {dir_}, Trust::Self()).status().message()),
              HasSubstr("not trusted; pass --as_user=nobody"));
  // Another service's untrusted entry is not ours to mention.
  EXPECT_EQ(Why(ListService("other", {dir_}, Trust::Self(), true), path), "");
  // Named, by name or uid: believed.
  for (const std::string& as : {std::string("nobody"), absl::StrCat(nobody)}) {
    absl::StatusOr<Trust> t = TrustUsers({as});
    ASSERT_TRUE(t.ok()) << t.status();
    l = ListService("shop", {dir_}, *t, true);
    ASSERT_EQ(l.workers.size(), 1u) << as;
    EXPECT_EQ(l.workers[0].pid, child);
    EXPECT_EQ(l.workers[0].uid, static_cast<int>(nobody));
  }
  // nobody's entry naming root's process (this test): not believed even
  // when nobody is trusted too.
  const std::string forged = Write(getpid(), Text(getpid(), StartTicks(getpid())));
  ASSERT_EQ(chown(forged.c_str(), nobody, nogroup), 0);
  l = ListService("shop", {dir_}, *TrustUsers({"nobody"}), true);
  EXPECT_THAT(Why(l, forged), HasSubstr("runs as uid 0, but its entry is owned by uid"));
  close(hold[1]);
  waitpid(child, nullptr, 0);
  // Stale now, but an untrusted user's: left alone.
  l = ListService("shop", {dir_}, Trust::Self(), /*clean=*/true);
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << "an untrusted user's stale entry was removed";
}

TEST_F(RegistryTest, ControlSpecs) {
  absl::StatusOr<ControlSpec> s = ParseControlSpec("all:shop");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, ControlSpec::Kind::kService);
  EXPECT_EQ(s->service, "shop");
  s = ParseControlSpec("pid:42");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->pid, 42);
  s = ParseControlSpec("127.0.0.1:50052");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->kind, ControlSpec::Kind::kAddress);
  EXPECT_THAT(std::string(ParseControlSpec("all:").status().message()), HasSubstr("--control=all:NAME"));
  EXPECT_THAT(std::string(ParseControlSpec("all:a/b").status().message()), HasSubstr("A-Z a-z 0-9"));
  EXPECT_THAT(std::string(ParseControlSpec("pid:0x10").status().message()), HasSubstr("not a process id"));
}

TEST_F(RegistryTest, ResolveReadsTheReadersRuntimeDir) {
  const int me = getpid();
  const int fd = Listen(0);
  ASSERT_GE(fd, 0);
  const std::string address = absl::StrCat("127.0.0.1:", PortOf(fd));
  Write(me, Text(me, StartTicks(me), "svc", address));
  ASSERT_EQ(setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1), 0);
  std::vector<Ignored> ignored;
  absl::StatusOr<std::vector<Entry>> w =
      Resolve(*ParseControlSpec("all:svc"), Trust::Self(), &ignored);
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_EQ(w->size(), 1u);
  EXPECT_EQ((*w)[0].pid, me);
  w = Resolve(*ParseControlSpec("all:nobody-here"), Trust::Self(), &ignored);
  EXPECT_TRUE(absl::IsNotFound(w.status()));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("no live worker of service 'nobody-here'"));
  w = Resolve(*ParseControlSpec(absl::StrCat("pid:", me)), Trust::Self(), nullptr);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ((*w)[0].address, address);
  close(fd);
}

// The port in an entry is checked just before it is called: the socket
// listening there must be the entry's process's, of its user.
TEST_F(RegistryTest, ResolveChecksWhoListensOnTheEntrysPort) {
  const int me = getpid();
  int fd = Listen(0);
  ASSERT_GE(fd, 0);
  const int port = PortOf(fd);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  const std::string path = Write(me, Text(me, StartTicks(me), "svc", address));
  ASSERT_EQ(setenv("XDG_RUNTIME_DIR", dir_.c_str(), 1), 0);
  Entry e = *ReadEntry(path, me, Trust::Self());
  EXPECT_TRUE(CheckListener(e).ok()) << CheckListener(e);
  Entry local = e;
  local.address = absl::StrCat("localhost:", port);
  EXPECT_TRUE(CheckListener(local).ok()) << CheckListener(local);
  // The same over IPv6 (/proc/net/tcp6), where the machine has it.
  const int fd6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 a6{};
  a6.sin6_family = AF_INET6;
  a6.sin6_addr = in6addr_loopback;
  if (fd6 >= 0 && bind(fd6, reinterpret_cast<sockaddr*>(&a6), sizeof(a6)) == 0 &&
      listen(fd6, 4) == 0) {
    socklen_t len = sizeof(a6);
    getsockname(fd6, reinterpret_cast<sockaddr*>(&a6), &len);
    Entry v6 = e;
    v6.address = absl::StrCat("[::1]:", ntohs(a6.sin6_port));
    EXPECT_TRUE(CheckListener(v6).ok()) << CheckListener(v6);
    v6.address = absl::StrCat("[::1]:", port);  // the v4 listener's port
    EXPECT_THAT(std::string(CheckListener(v6).message()), HasSubstr("no socket listens there"));
  }
  if (fd6 >= 0) close(fd6);
  Entry named = e;
  named.address = absl::StrCat("example.com:", port);
  EXPECT_THAT(std::string(CheckListener(named).message()),
              HasSubstr("'example.com' is not a numeric address"));

  // Closed: nothing listens, nothing to call.
  close(fd);
  std::vector<Ignored> ignored;
  absl::StatusOr<std::vector<Entry>> w =
      Resolve(*ParseControlSpec("all:svc"), Trust::Self(), &ignored);
  EXPECT_TRUE(absl::IsNotFound(w.status())) << w.status();
  EXPECT_THAT(Why({{}, ignored}, path), HasSubstr("no socket listens there"));
  w = Resolve(*ParseControlSpec(absl::StrCat("pid:", me)), Trust::Self(), nullptr);
  EXPECT_TRUE(absl::IsPermissionDenied(w.status())) << w.status();
  EXPECT_THAT(std::string(w.status().message()),
              HasSubstr(absl::StrCat("pid ", me, "'s address ", address, ": no socket listens")));

  // Bound again by another process (of the same user here; another user's
  // is //tests:registry_trust_test): not the entry's process's socket.
  int ready[2], hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    close(hold[1]);
    char c = Listen(port) >= 0 ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(hold[0], &c, 1);
    _exit(0);
  }
  ASSERT_GT(child, 0);
  close(ready[1]);
  close(hold[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  w = Resolve(*ParseControlSpec("all:svc"), Trust::Self(), &ignored);
  EXPECT_TRUE(absl::IsNotFound(w.status())) << w.status();
  const std::string why = Why({{}, ignored}, path);
  EXPECT_THAT(why, HasSubstr("is listened on by another process"));
  EXPECT_THAT(why, HasSubstr(absl::StrCat("not one of pid ", me, "'s")));
  EXPECT_FALSE(absl::StrContains(why, "\n"));
  close(hold[1]);
  waitpid(child, nullptr, 0);
  close(ready[0]);
}

}  // namespace
}  // namespace registry
}  // namespace rsslab
