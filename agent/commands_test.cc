#include "agent/commands.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "agent/stop_outcome.h"

namespace rsslab {
namespace commands {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<std::map<std::string, Command>> One(const std::string& args,
                                                   std::vector<std::string> ready = {},
                                                   std::vector<std::string> port = {}) {
  return Parse({"svc=/bin/true"}, {"svc=" + args}, ready, port);
}

TEST(CommandsTest, NoReadyFlagMeansThePortAccepts) {
  auto c = One("--port={port} --threads={threads}");
  ASSERT_TRUE(c.ok()) << c.status();
  const Command& svc = c->at("svc");
  EXPECT_TRUE(svc.ready_line.empty());
  EXPECT_EQ(svc.ready_port, Command::ReadyPort::kPort);
  launch::LaunchOptions lo;
  Values v;
  ASSERT_TRUE(Configure(svc, "127.0.0.1", 3, &lo, &v).ok());
  EXPECT_EQ(lo.program, c->at("svc").path);  // resolved (realpath)
  EXPECT_EQ(lo.program[0], '/');
  EXPECT_THAT(lo.fixed_args, ElementsAre("--port=" + std::to_string(v.port), "--threads=3"));
  EXPECT_GT(v.port, 0);
  EXPECT_EQ(lo.ready_port, v.port);
  EXPECT_TRUE(lo.ready_match.empty());
  EXPECT_EQ(lo.verify, launch::Verify::kProfileOnly);
  EXPECT_EQ(lo.flag_check, launch::LaunchOptions::FlagCheck::kNone);
}

TEST(CommandsTest, ReadyRegexAloneWaitsForTheLineOnly) {
  auto c = One("--port={port}", {"svc=^svc ready "});
  ASSERT_TRUE(c.ok()) << c.status();
  const Command& svc = c->at("svc");
  EXPECT_TRUE(svc.ready_line.Matches("svc ready data=x"));
  EXPECT_EQ(svc.ready_port, Command::ReadyPort::kNone);
  launch::LaunchOptions lo;
  Values v;
  ASSERT_TRUE(Configure(svc, "127.0.0.1", 1, &lo, &v).ok());
  EXPECT_EQ(lo.ready_port, 0);
  EXPECT_TRUE(lo.ready_match.Matches("svc ready "));
}

TEST(CommandsTest, LineThenControlPort) {
  auto c = One("--port={port} --control={control_port}", {"svc=ready"}, {"svc={control_port}"});
  ASSERT_TRUE(c.ok()) << c.status();
  launch::LaunchOptions lo;
  Values v;
  ASSERT_TRUE(Configure(c->at("svc"), "127.0.0.1", 1, &lo, &v).ok());
  EXPECT_GT(v.control_port, 0);
  EXPECT_EQ(lo.ready_port, v.control_port);
  EXPECT_FALSE(lo.ready_match.empty());
  std::string data, control;
  ASSERT_TRUE(Addresses(c->at("svc"), v, "ready", &data, &control).ok());
  EXPECT_EQ(data, "127.0.0.1:" + std::to_string(v.port));
  EXPECT_EQ(control, "127.0.0.1:" + std::to_string(v.control_port));
}

TEST(CommandsTest, RefusedWithOneLineNamingTheFlag) {
  auto bad_re = One("--port={port}", {"svc=ready ("});
  ASSERT_FALSE(bad_re.ok());
  EXPECT_THAT(bad_re.status().message(), HasSubstr("--allow_command_ready=svc=ready (: bad regex"));
  auto bad_port = One("--port={port}", {}, {"svc=8080"});
  ASSERT_FALSE(bad_port.ok());
  EXPECT_THAT(bad_port.status().message(), HasSubstr("--allow_command_ready_port=svc=8080"));
  auto no_cport = One("--port={port}", {}, {"svc={control_port}"});
  ASSERT_FALSE(no_cport.ok());
  EXPECT_THAT(no_cport.status().message(), HasSubstr("does not pass {control_port}"));
  auto unknown = Parse({"svc=/bin/true"}, {"svc=--port={port}"}, {"other=x"}, {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("no --allow_command named other"));
  auto no_port = One("--threads={threads}");
  ASSERT_FALSE(no_port.ok());
  EXPECT_THAT(no_port.status().message(), HasSubstr("must pass {port}"));
  auto rel = Parse({"svc=bin/true"}, {}, {}, {});
  ASSERT_FALSE(rel.ok());
  EXPECT_THAT(rel.status().message(), HasSubstr("absolute path to an executable"));
}

TEST(CommandsTest, ControlFromTheReadyLine) {
  auto c = One("--port={port}", {R"(svc=^svc ready .*control=(?P<control>\S+))"});
  ASSERT_TRUE(c.ok()) << c.status();
  Values v;
  v.port = 4000;
  std::string data, control;
  ASSERT_TRUE(
      Addresses(c->at("svc"), v, "svc ready data=x control=127.0.0.1:4001", &data, &control).ok());
  EXPECT_EQ(data, "127.0.0.1:4000");
  EXPECT_EQ(control, "127.0.0.1:4001");
  absl::Status bad = Addresses(c->at("svc"), v, "svc ready control=nowhere", &data, &control);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("not HOST:PORT: 'nowhere'"));
}

std::vector<std::string> Words(const std::string& text) {
  auto c = One(text);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  Values v;
  v.port = 7;
  v.threads = 3;
  return Expand(c->at("svc"), v);
}

TEST(CommandsTest, OneQuotingRuleForTheTemplate) {
  EXPECT_THAT(Words("--port={port} --q='a b'"), ElementsAre("--port=7", "--q=a b"));
  EXPECT_THAT(Words(R"(--port={port} "a \"b\" \\ \n" 'it''s' x\ y)"),
              ElementsAre("--port=7", R"(a "b" \ \n)", "its", "x y"));
  // Metacharacters are literal; single quotes keep braces (no placeholder).
  EXPECT_THAT(Words("--port={port} a;b $(id) `id` 'c|d' * '{port}' \"{threads}\" ''"),
              ElementsAre("--port=7", "a;b", "$(id)", "`id`", "c|d", "*", "{port}", "3", ""));
  // Tabs and runs of spaces separate words.
  EXPECT_THAT(Words("  --port={port}\t\tx   "), ElementsAre("--port=7", "x"));
}

TEST(CommandsTest, QuotedWordsSplitBackIntoTheSameWords) {
  const std::vector<std::string> words = {"--port=7", "a b", "it's", "", "$(id)", "x\\\"y", "*",
                                          "{port}"};
  const std::string text = JoinQuoted(words);
  EXPECT_EQ(text, R"(--port=7 'a b' 'it'\''s' '' '$(id)' 'x\"y' '*' '{port}')");
  auto split = SplitTemplate(text);
  ASSERT_TRUE(split.ok()) << split.status();
  std::vector<std::string> back;
  for (const TemplateWord& w : *split) {
    std::string s;
    for (const TemplateWord::Part& p : w.parts) s += p.text;
    back.push_back(s);
  }
  EXPECT_EQ(back, words);
}

TEST(CommandsTest, TemplatesThatDoNotSplitAreRefusedNamingWhy) {
  struct Case {
    std::string text, why;
  } cases[] = {
      {"--port={port} 'open", "a single quote at character 15 is never closed"},
      {"--port={port} \"open", "a double quote at character 15 is never closed"},
      {"--port={port} end\\", "a backslash at the end escapes nothing"},
      {"--port={port}\n--x", "a control character (byte 10) at character 14"},
      {"--port={port} \"{prot}\"", "placeholders are {threads}, {port}"},
      {"--port={port} \\{port}", "placeholders are"},
      {"'--port={port}'", "must pass {port}"},
  };
  for (const Case& c : cases) {
    auto r = One(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.why)) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr("--allow_command_args=svc=")) << c.text;
    EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << r.status();
  }
}

TEST(CommandsTest, ControlAddressOnLoopbackOrWhereTheOperatorAllows) {
  const std::string re = R"(svc=^ready control=(?P<control>\S+))";
  auto plain = One("--port={port}", {re});
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto allowed = Parse({"svc=/bin/true"}, {"svc=--port={port}"}, {re}, {},
                       {"svc=10.1.2.3,192.168.7.7:4001,[fe80::1]"});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  Values v;
  v.port = 4000;
  struct Case {
    std::string address;
    bool plain_ok, allowed_ok;
  } cases[] = {
      {"127.0.0.1:4001", true, true},     {"127.9.9.9:4001", true, true},
      {"localhost:4001", true, true},     {"[::1]:4001", true, true},
      {"10.1.2.3:4001", false, true},     {"10.1.2.3:9", false, true},
      {"192.168.7.7:4001", false, true},  {"192.168.7.7:4002", false, false},
      {"[fe80::1]:5", false, true},       {"10.1.2.4:4001", false, false},
      {"evil.example.com:443", false, false},
  };
  for (const Case& c : cases) {
    std::string data, control;
    absl::Status p = Addresses(plain->at("svc"), v, "ready control=" + c.address, &data, &control);
    EXPECT_EQ(p.ok(), c.plain_ok) << c.address << " " << p;
    if (p.ok()) {
      EXPECT_EQ(control, c.address);
    } else {
      EXPECT_THAT(p.message(), HasSubstr("is neither on loopback nor one "
                                         "--allow_command_control=svc=... allows (none given)"));
    }
    absl::Status a = Addresses(allowed->at("svc"), v, "ready control=" + c.address, &data, &control);
    EXPECT_EQ(a.ok(), c.allowed_ok) << c.address << " " << a;
    if (!a.ok()) {
      EXPECT_THAT(a.message(), HasSubstr("(10.1.2.3,192.168.7.7:4001,fe80::1)"));
    }
  }
  auto bad = Parse({"svc=/bin/true"}, {"svc=--port={port}"}, {re}, {}, {"svc=example.com"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("--allow_command_control=svc=example.com: 'example.com' is not HOST or "
                        "HOST:PORT with HOST an IP address"));
}

TEST(CommandsTest, LookupNamesWhatWasGiven) {
  auto c = One("--port={port}");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(Lookup(*c, "svc", "this loadgen").ok());
  absl::StatusOr<const Command*> m = Lookup(*c, "/usr/bin/python3", "this loadgen");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(),
              HasSubstr("is not one this loadgen was started with (--allow_command: svc)"));
}

// The one rule for how a stopped program ended (the sweep, rsslab_run).
TEST(StopOutcomeTest, SigtermDeathAndDeclaredCodesAreANormalStop) {
  using launch::Ending;
  using launch::JudgeStop;
  auto ok = launch::ParseOkExitCodes("0,143");
  ASSERT_TRUE(ok.ok()) << ok.status();
  const std::vector<int> zero = {0};
  EXPECT_EQ(JudgeStop({false, -1, SIGTERM}, zero).ending, Ending::kNormalStop);
  EXPECT_EQ(JudgeStop({false, 0, 0}, zero).ending, Ending::kNormalStop);
  EXPECT_EQ(JudgeStop({false, 143, 0}, *ok).ending, Ending::kNormalStop);
  auto bad = JudgeStop({false, 143, 0}, zero);
  EXPECT_EQ(bad.ending, Ending::kBadStop);
  EXPECT_EQ(bad.why, "exited 143 after stop (not in --ok_exit_codes=0)");
  auto killed = JudgeStop({false, -1, SIGKILL}, *ok);
  EXPECT_EQ(killed.ending, Ending::kBadStop);
  EXPECT_THAT(killed.why, HasSubstr("did not exit within the grace period"));
  EXPECT_EQ(JudgeStop({false, -1, SIGSEGV}, zero).why, "killed by SIGSEGV after stop");
  EXPECT_EQ(JudgeStop({false, -1, 0}, zero).ending, Ending::kBadStop);  // adopted: unknown
  // Before stop, even a clean exit or SIGTERM from someone else is a death.
  EXPECT_EQ(JudgeStop({true, 0, 0}, zero).ending, Ending::kDiedBeforeStop);
  EXPECT_EQ(JudgeStop({true, -1, SIGTERM}, zero).ending, Ending::kDiedBeforeStop);
  // A running process is not ending; a zombie (exited, not reaped) is.
  EXPECT_FALSE(launch::EndedOrEnding(getpid()));
  const pid_t child = fork();
  if (child == 0) _exit(0);
  for (int i = 0; i < 200 && !launch::EndedOrEnding(child); ++i) usleep(10000);
  EXPECT_TRUE(launch::EndedOrEnding(child));
  waitpid(child, nullptr, 0);
  EXPECT_TRUE(launch::EndedOrEnding(child));  // gone
  for (const char* bad_list : {"", "0,,1", "256", "-1", "0x10", " 1", "1,1", "a"}) {
    auto p = launch::ParseOkExitCodes(bad_list);
    EXPECT_FALSE(p.ok()) << bad_list;
    if (!p.ok()) {
      EXPECT_THAT(p.status().message(), HasSubstr("--ok_exit_codes")) << bad_list;
    }
  }
}

}  // namespace
}  // namespace commands
}  // namespace rsslab
