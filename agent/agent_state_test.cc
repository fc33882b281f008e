// The state file's round trip and its refusals, and the /proc checks that
// decide whether a recorded pid is still the recorded server.
#include "agent/agent_state.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

std::string Tmp(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  return absl::StrCat(t ? t : "/tmp", "/", name);
}

TEST(ProcStat, CountsFieldsAfterTheLastParenthesis) {
  // A command name with spaces and a ')' must not shift the fields.
  auto st = agent_state::ParseProcStat(
      "42 (a) b (c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 98765 1000 10 "
      "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->start_ticks, 98765u);
  EXPECT_FALSE(agent_state::ParseProcStat("42 (x) S 1 2").ok());
  EXPECT_FALSE(agent_state::ParseProcStat("garbage").ok());
}

TEST(ProcStat, OwnProcessAndAGoneOne) {
  auto self = agent_state::ReadProcStat(getpid());
  ASSERT_TRUE(self.ok()) << self.status();
  EXPECT_GT(self->start_ticks, 0u);
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(absl::IsNotFound(agent_state::ReadProcStat(child).status()));
}

TEST(WhyNotAlive, SamePidOtherStartTimeOrBinaryIsNotOurs) {
  auto self = agent_state::ReadProcStat(getpid());
  ASSERT_TRUE(self.ok());
  const std::string exe = agent_state::ExePath(getpid());
  v1::AgentStateServer rec;
  rec.mutable_server()->set_pid(getpid());
  rec.set_start_ticks(self->start_ticks);
  EXPECT_EQ(agent_state::WhyNotAlive(rec, exe), "");
  EXPECT_NE(agent_state::WhyNotAlive(rec, "/usr/bin/not-this").find("not the configured server binary"),
            std::string::npos);
  rec.set_start_ticks(self->start_ticks + 1);
  EXPECT_NE(agent_state::WhyNotAlive(rec, exe).find("belongs to another process"), std::string::npos);
}

TEST(StateFile, RoundTripAndClearErrors) {
  const std::string path = Tmp("servers.json");
  unlink(path.c_str());
  EXPECT_TRUE(absl::IsNotFound(agent_state::Read(path).status()));
  v1::AgentState st;
  st.set_next_id(7);
  auto* s = st.add_servers();
  s->mutable_server()->set_id("s0003-glibc-t2");
  s->mutable_server()->set_pid(1234);
  s->set_start_ticks(55);
  s->add_args("--threads=2");
  ASSERT_TRUE(agent_state::Write(path, st).ok());
  auto back = agent_state::Read(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->next_id(), 7);
  ASSERT_EQ(back->servers_size(), 1);
  EXPECT_EQ(back->servers(0).server().id(), "s0003-glibc-t2");
  EXPECT_EQ(back->servers(0).start_ticks(), 55u);
  struct stat sb;
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0600u);  // it names the servers' command lines

  std::ofstream(path) << "{\"servers\": [ {\"server\": {\"id\": \"s0001";  // torn
  auto torn = agent_state::Read(path);
  ASSERT_TRUE(absl::IsInvalidArgument(torn.status()));
  EXPECT_NE(torn.status().message().find("is unreadable"), std::string::npos);
  EXPECT_EQ(torn.status().message().find('\n'), std::string::npos);  // one line

  std::ofstream(path) << "{\"servers\": [ {\"server\": {\"id\": \"x\", \"pid\": 0}} ]}";
  EXPECT_TRUE(absl::IsInvalidArgument(agent_state::Read(path).status()));
}

TEST(StateDir, RefusesOthersWritableAndLocksOnce) {
  const std::string dir = Tmp("state");
  ASSERT_TRUE(agent_state::PrepareDir(dir).ok());
  chmod(dir.c_str(), 0777);
  auto s = agent_state::PrepareDir(dir);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writable by others"), std::string::npos);
  chmod(dir.c_str(), 0700);
  ASSERT_TRUE(agent_state::PrepareDir(dir).ok());
  auto fd = agent_state::LockDir(dir);
  ASSERT_TRUE(fd.ok()) << fd.status();
  auto again = agent_state::LockDir(dir);  // flock is per open file description
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find(absl::StrCat("in use by another rsslab_agent (pid ", getpid())),
            std::string::npos)
      << again.status();
  close(*fd);
  EXPECT_TRUE(agent_state::LockDir(dir).ok());
}

}  // namespace
}  // namespace rsslab
