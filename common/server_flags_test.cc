#include "common/server_flags.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;

TEST(ServerFlagsTest, ARequestMaySetOnlyWhatChangesTheExperiment) {
  EXPECT_TRUE(CheckServerFlag("cache_limit_mb", "200", FlagSource::kRequest).ok());
  EXPECT_TRUE(CheckServerFlag("thread_mode", "churn", FlagSource::kRequest).ok());
  EXPECT_TRUE(CheckServerFlag("handler_params", "shape=nested", FlagSource::kRequest).ok());
  for (const char* f : {"listen", "handler", "threads", "auth_token_file", "auto_trim", "LD_PRELOAD",
                        "flagfile"}) {
    absl::Status s = CheckServerFlag(f, "x", FlagSource::kRequest);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << f;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("server flag '", f, "' is not allowed"))) << f;
  }
}

TEST(ServerFlagsTest, TheOperatorMaySetEveryServerFlagStillRangeChecked) {
  EXPECT_TRUE(CheckServerFlag("auto_trim", "after_burst", FlagSource::kOperator).ok());
  EXPECT_TRUE(CheckServerFlag("listen", "127.0.0.1:0", FlagSource::kOperator).ok());
  EXPECT_TRUE(CheckServerFlag("threads", "4096", FlagSource::kOperator).ok());
  EXPECT_FALSE(CheckServerFlag("threads", "4097", FlagSource::kOperator).ok());
  EXPECT_FALSE(CheckServerFlag("auto_trim", "sometimes", FlagSource::kOperator).ok());
  EXPECT_FALSE(CheckServerFlag("flagfile", "/etc/x", FlagSource::kOperator).ok());
  // The benchmark server's own knob (bench/dispatch/) is no product flag:
  // not even the operator may pass it to rsslab_server.
  EXPECT_EQ(FindServerFlag("dispatch"), nullptr);
  EXPECT_FALSE(CheckServerFlag("dispatch", "pool", FlagSource::kOperator).ok());
}

TEST(ServerFlagsTest, ValuesOutsideTheServersOwnRangesAreRefused) {
  absl::Status s = CheckServerFlag("churn_every", "0", FlagSource::kRequest);
  EXPECT_THAT(s.message(), HasSubstr("want an integer in [1, 1073741824]"));
  EXPECT_FALSE(CheckServerFlag("cache_limit_mb", "-1", FlagSource::kRequest).ok());
  EXPECT_FALSE(CheckServerFlag("cache_limit_mb", "1e3", FlagSource::kRequest).ok());
  EXPECT_TRUE(CheckServerFlag("max_watch_streams", "0", FlagSource::kRequest).ok());
  EXPECT_TRUE(CheckServerFlag("auto_trim_settle_fraction", "0.5", FlagSource::kOperator).ok());
  EXPECT_FALSE(CheckServerFlag("auto_trim_settle_fraction", "1", FlagSource::kOperator).ok());
  EXPECT_FALSE(CheckServerFlag("auto_trim_settle_fraction", "nan", FlagSource::kOperator).ok());
  EXPECT_FALSE(CheckServerFlag("handler_params", "a=\x01", FlagSource::kRequest).ok());
  EXPECT_FALSE(CheckServerFlag("handler_params", "a-b=1", FlagSource::kRequest).ok());
  EXPECT_FALSE(CheckServerFlag("trim_thread_stats", "maybe", FlagSource::kOperator).ok());
}

TEST(ServerFlagsTest, ArgumentsInEveryCommandLineFormAreNormalised) {
  auto a = ParseServerArgs(
      {"--threads=4", "--listen", "127.0.0.1:0", "--trim_thread_stats", "--noinsecure_listen",
       "-cache_limit_mb=20"},
      FlagSource::kOperator);
  ASSERT_TRUE(a.ok()) << a.status();
  using P = std::pair<std::string, std::string>;
  EXPECT_THAT(*a, ::testing::ElementsAre(P{"threads", "4"}, P{"listen", "127.0.0.1:0"},
                                         P{"trim_thread_stats", "true"},
                                         P{"insecure_listen", "false"}, P{"cache_limit_mb", "20"}));
  EXPECT_THAT(ParseServerArgs({"positional"}, FlagSource::kOperator).status().message(),
              HasSubstr("is not a server flag"));
  EXPECT_THAT(ParseServerArgs({"--threads"}, FlagSource::kOperator).status().message(),
              HasSubstr("needs a value"));
  EXPECT_FALSE(ParseServerArgs({"--listen=0.0.0.0:1"}, FlagSource::kRequest).ok());
}

TEST(ServerFlagsTest, HelpListsWhatEachSourceMaySet) {
  const std::string req = ServerFlagsHelp(FlagSource::kRequest);
  EXPECT_THAT(req, HasSubstr("cache_limit_mb (0..1073741824)"));
  EXPECT_THAT(req, HasSubstr("thread_mode (fixed,churn)"));
  EXPECT_THAT(req, ::testing::Not(HasSubstr("listen")));
  EXPECT_THAT(ServerFlagNames(FlagSource::kOperator), HasSubstr("auto_trim"));
  for (const ServerFlagRule& r : ServerFlagRules()) {
    EXPECT_EQ(FindServerFlag(r.name), &r);
  }
  EXPECT_EQ(FindServerFlag("nope"), nullptr);
}

}  // namespace
}  // namespace rsslab
