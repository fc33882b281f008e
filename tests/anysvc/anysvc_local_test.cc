// The user's own grpcio service (shop_service.py) swept by the loadgen
// itself, without an agent: `--local --command` with the same
// --allow_command allowlist an agent takes, one cell per invocation as a
// Slurm array task or a Kubernetes Indexed Job pod runs it
// (--cell_index_env, --results_dir), then `merge` into a complete table.
// Real processes: the loadgen launches the service under real allocator
// profiles (LD_PRELOAD, /proc checks) and drives it over gRPC.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kData[] = R"({"id": {{seq}}, "customer": "c{{rand_str 32}}", "tags": ["t{{seq}}"]})";

// The sweep's command line; each array task adds nothing but its index.
std::vector<std::string> SweepArgs(const std::string& results) {
  const std::string shop = ServerProcess::Runfile("tests/anysvc/shop_service.py");
  return {"--builtin=sweep", "--local", "--command=shop",
          "--allow_command=shop=" + shop,
          // Python's default SIGTERM handling: the stop kills it, normally.
          "--allow_command_args=shop=--port={port} --threads={threads} --hold_kb=4 "
          "--sigterm=default",
          // No ready flag: ready when {port} accepts a connection.
          "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
          "--profiles=glibc-arena2,jemalloc", "--threads_list=2", "--repeats=1", "--scale=0.005",
          "--wait=1s",  // the idle wait: the cells' table, not its figures, is tested
          "--proto=" + ServerProcess::Runfile("tests/anysvc/shop.proto"), "--call=shop.v1.Cart/Add",
          std::string("--data=") + kData, "--concurrency=4", "--channels=2",
          "--cell_index_env=TASK_INDEX", "--results_dir=" + results, "--progress=lines"};
}

TEST(LocalCommandSweep, TwoArrayTasksMergeIntoACompleteTable) {
  const std::string results = Tmp("cells");
  for (const char* index : {"1", "0"}) {  // any order, as a batch system runs them
    auto r = ServerProcess::Run(Loadgen(), SweepArgs(results), {{"TASK_INDEX", index}},
                                absl::Seconds(300));
    ASSERT_EQ(r.exit_code, 0) << "task " << index << ":\n" << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("snapshot steps read /proc/PID from outside"));
  }
  auto m = ServerProcess::Run(Loadgen(), {"merge", "--out=" + Tmp("merged"), results});
  ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_THAT(m.out, HasSubstr("2 of 2 cells ok"));
  EXPECT_THAT(m.out, HasSubstr("glibc-arena2"));
  EXPECT_THAT(m.out, HasSubstr("jemalloc"));
  // Each cell: the service itself, verified, with memory read from outside.
  int cells = 0, proc_snapshots = 0;
  for (const auto& e : Events(Tmp("merged"))) {
    if (e.has_cell_result()) {
      ++cells;
      EXPECT_TRUE(e.cell_result().ok()) << e.cell_result().ShortDebugString();
      const auto& srv = e.cell_result().server();
      EXPECT_EQ(srv.command(), "shop");
      EXPECT_EQ(srv.term_signal(), SIGTERM);  // stopped: SIGTERM's default action
      EXPECT_FALSE(srv.ended_before_stop());
      if (srv.profile() == "jemalloc") {
        EXPECT_THAT(srv.mapped_library(), HasSubstr("libjemalloc"));
      }
    }
    if (e.has_snapshot() && e.snapshot().taken_from() == "proc") ++proc_snapshots;
  }
  EXPECT_EQ(cells, 2);
  EXPECT_GE(proc_snapshots, 2 * 3);
}

TEST(LocalCommandSweep, TheAllowlistRulesHoldHereToo) {
  std::vector<std::string> args = SweepArgs(Tmp("refused"));
  // A command the loadgen was not given.
  std::vector<std::string> other = args;
  other[2] = "--command=python3";
  auto r = ServerProcess::Run(Loadgen(), other, {{"TASK_INDEX", "0"}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("command 'python3' is not one this loadgen was started with "
                               "(--allow_command: shop)"));
  // A template with an unknown placeholder, as the agent refuses it.
  std::vector<std::string> bad = args;
  bad[4] = "--allow_command_args=shop=--port={port} --cwd={home}";
  r = ServerProcess::Run(Loadgen(), bad, {{"TASK_INDEX", "0"}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("placeholders are {threads}, {port}, {control_port} and {host}"));
  // The allowlist is --local's: through an agent it is the agent's.
  std::vector<std::string> agent = args;
  agent[1] = "--agent=127.0.0.1:1";
  r = ServerProcess::Run(Loadgen(), agent, {{"TASK_INDEX", "0"}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--allow_command* is --local's allowlist"));
}

}  // namespace
}  // namespace testing
}  // namespace rsslab
