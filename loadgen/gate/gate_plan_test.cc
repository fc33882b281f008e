// The gate's plan from a command line (which flags pass through to each
// run, which are refused, each side's command) and its strip plot.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadgen/gate/gate.h"
#include "loadgen/gate/gate_report.h"

namespace rsslab {
namespace gate {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Flags WithService(const std::string& cmd) {
  Flags f;
  f.service = cmd;
  f.out = "/tmp/gate-plan-test";
  return f;
}

TEST(GatePlan, RunFlagsPassThroughAndEachRunIsOneLocalCell) {
  Flags f = WithService("/bin/sh svc.sh --port={port} --threads={threads}");
  f.head_env = "MALLOC_ARENA_MAX=2";
  f.head_args = "--concurrency=8";
  auto p = PlanFromArgs({"rsslab_loadgen", "gate", "--service=x", "--scale=0.01", "--min_repeats", "4",
                         "--wait=1s"},
                        f);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(p->passthrough, ElementsAre("--scale=0.01", "--wait=1s", "--builtin=sweep",
                                          "--profiles=glibc", "--threads_list=4"));
  ASSERT_TRUE(ResolveCommand(&p->side[kHead]).ok());
  EXPECT_EQ(p->side[kHead].program, "/bin/sh");
  EXPECT_EQ(p->side[kHead].template_args, "svc.sh --port={port} --threads={threads}");
  EXPECT_THAT(p->side[kHead].env, ElementsAre("MALLOC_ARENA_MAX=2"));
  const std::vector<std::string> a = ChildArgs(*p, kHead, 3);
  EXPECT_THAT(a, Contains("--local"));
  EXPECT_THAT(a, Contains("--repeats=1"));
  EXPECT_THAT(a, Contains("--out=/tmp/gate-plan-test/head/run-03"));
  // The head's start environment through env(1): a launch takes allocator
  // variables from the profile only.
  EXPECT_THAT(a, Contains("--allow_command=service=/usr/bin/env"));
  EXPECT_THAT(a, Contains("--allow_command_args=service=MALLOC_ARENA_MAX=2 /bin/sh svc.sh "
                          "--port={port} --threads={threads}"));
  ASSERT_TRUE(ResolveCommand(&p->side[kBase]).ok());
  EXPECT_THAT(ChildArgs(*p, kBase, 1), Contains("--allow_command=service=/bin/sh"));
  EXPECT_THAT(a, Contains("--concurrency=8"));
  EXPECT_THAT(ChildArgs(*p, kBase, 3), Not(Contains("--concurrency=8")));
}

TEST(GatePlan, UsageErrorsNameTheFlag) {
  const std::vector<std::string> argv = {"rsslab_loadgen", "gate"};
  auto r = PlanFromArgs({"l", "gate", "--repeats=3"}, WithService("/bin/sh"));
  EXPECT_THAT(r.status().message(), HasSubstr("--repeats: the gate sets it for each run"));
  r = PlanFromArgs({"l", "gate", "0.5"}, WithService("/bin/sh"));
  EXPECT_THAT(r.status().message(), HasSubstr("unexpected argument \"0.5\""));
  Flags f = WithService("");
  f.base_command = "/bin/sh";
  r = PlanFromArgs(argv, f);
  EXPECT_THAT(r.status().message(), HasSubstr("--base_command without a command for head"));
  f = WithService("/bin/sh");
  f.base_dir = "/tmp";
  r = PlanFromArgs(argv, f);
  EXPECT_THAT(r.status().message(), HasSubstr("--base_dir without --head_dir"));
  f = WithService("/bin/sh");
  f.max_repeats = 500;
  r = PlanFromArgs(argv, f);
  EXPECT_THAT(r.status().message(), HasSubstr("use 2 to 200 runs a side"));
  f = WithService("/bin/sh");
  f.head_env = "1BAD=x";
  r = PlanFromArgs(argv, f);
  EXPECT_THAT(r.status().message(), HasSubstr("--head_env: \"1BAD=x\" is not NAME=value"));
  f = WithService("/bin/sh");
  f.base_args = "--local";
  r = PlanFromArgs(argv, f);
  EXPECT_THAT(r.status().message(), HasSubstr("--base_args: --local: the gate sets it"));
  f = WithService("");
  f.head_env = "MALLOC_ARENA_MAX=2";
  r = PlanFromArgs(argv, f);
  EXPECT_THAT(r.status().message(),
              HasSubstr("--head_env=MALLOC_ARENA_MAX: the lab server takes its allocator setup"));
  Side s;
  s.command = "no-such-program-here --port={port}";
  EXPECT_THAT(ResolveCommand(&s).message(), HasSubstr("no-such-program-here is not an executable file in PATH"));
}

TEST(GateReport, StripPlotPutsEachRunOnOneAxis) {
  const std::string plot = StripPlot({10, 10, 11}, {20, 19.5, 20.5}, "MiB", 16);
  EXPECT_EQ(plot,
            "  base |2o              |\n"
            "  head |              2x|\n"
            "        10.00      20.50 MiB\n");
}

}  // namespace
}  // namespace gate
}  // namespace rsslab
