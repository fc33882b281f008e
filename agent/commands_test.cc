#include "agent/commands.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace commands
}  // namespace rsslab
