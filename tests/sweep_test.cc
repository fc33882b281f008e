// Sweeps end to end: a real rsslab_agent on loopback launches real servers
// for a real rsslab_loadgen. A tiny matrix yields a complete table and both
// PNGs; `rsslab_loadgen report` rebuilds the same table from events.jsonl
// alone, and loadgen/results/plots_and_advice.py's advice quotes the loadgen's cells.json; a cell whose server crashes mid-run or fails to
// start is recorded with its exit and log tail while the other cells run.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/exit_text.h"
#include "agent/output_pump.h"
#include "agent/profiles.h"
#include "agent/spawn.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;
using ::rsslab::v1::Event;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Tmp(const std::string& name) { return absl::StrCat(getenv("TEST_TMPDIR"), "/", name); }
std::string DirOf(const std::string& p) { return p.substr(0, p.find_last_of('/')); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::vector<Event> Events(const std::string& dir) {
  std::ifstream in(dir + "/events.jsonl");
  std::vector<Event> out;
  std::string line;
  while (std::getline(in, line)) {
    Event e;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(line, &e).ok()) << line;
    out.push_back(e);
  }
  return out;
}

// The agent as a child of the test; ready once it printed its ready line.
class Agent {
 public:
  Agent() {
    int out[2];
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    launch::SpawnOptions so;
    so.binary = ServerProcess::Runfile("agent/rsslab_agent");
    so.args = {"--listen=127.0.0.1:0",
               "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
               "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
               "--handler_dirs=" + DirOf(ServerProcess::Runfile("server/handlers/web_worker.py")) +
                   "," + DirOf(ServerProcess::Runfile("tests/handlers/import_error.py")),
               "--log_dir=" + Tmp("agent-logs")};
    so.env = profiles::EnvStrings(profiles::CurrentEnviron());
    so.stdout_fd = out[1];
    absl::StatusOr<pid_t> pid = launch::Spawn(so);
    close(out[1]);
    EXPECT_TRUE(pid.ok()) << pid.status();
    pid_ = pid.ok() ? *pid : -1;
    pump_ = std::make_unique<launch::OutputPump>(
        out[0], 2, false, launch::LineMatch::Prefix("rsslab_agent ready "), false);
    launch::OutputPump::Result r = pump_->WaitReady(absl::Seconds(30));
    EXPECT_EQ(r.state, launch::OutputPump::kReady);
    for (absl::string_view f : absl::StrSplit(r.line, ' ')) {
      if (absl::ConsumePrefix(&f, "listen=")) address_ = std::string(f);
    }
  }
  ~Agent() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& address() const { return address_; }
  // As if its machine went away: no goodbye, its servers left running.
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  std::string address_;
  std::unique_ptr<launch::OutputPump> pump_;
};

// Seed 000's steps, small: the idle wait is short because the test checks
// the machinery, not the allocators.
std::string TinyScenario(const std::string& sweep) {
  return absl::StrCat(
      "name: \"tiny\"\n", sweep, "\n",
      "load_defaults { concurrency: 16 channels: 2 }\n"
      "step { name: \"fill\" set_phase { phase: \"fill\" cache_limit_mb: 100 } }\n"
      "step { name: \"fill\" load { requests: 1500 } }\n"
      "step { name: \"after_fill\" snapshot { gc: true } }\n"
      "step { name: \"shrink\" set_phase { phase: \"shrink\" cache_limit_mb: 10 } }\n"
      "step { name: \"shrink\" load { requests: 750 } }\n"
      "step { name: \"after_shrink\" snapshot { gc: true } }\n"
      "step { name: \"idle\" set_phase { phase: \"idle\" } }\n"
      "step { name: \"idle\" wait { seconds: 0.2 } }\n"
      "step { name: \"after_idle\" snapshot { gc: true } }\n"
      "step { name: \"trim\" set_phase { phase: \"trim\" gc: true } }\n");
}

ServerProcess::Result Loadgen(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  a.push_back("--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"));
  a.push_back("--progress=lines");
  return ServerProcess::Run(ServerProcess::Runfile("loadgen/rsslab_loadgen"), a, {},
                            absl::Seconds(120));
}

ServerProcess::Result Python(const std::vector<std::string>& args) {
  return ServerProcess::Run("/usr/bin/python3", args, {}, absl::Seconds(60));
}

std::vector<std::vector<std::string>> Csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    rows.push_back(absl::StrSplit(line, ','));
  }
  return rows;
}

void ExpectPng(const std::string& path) {
  const std::string png = ReadFile(path);
  ASSERT_GT(png.size(), 1000u) << path;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
}

TEST(SweepTest, TinySweepYieldsCompleteTablePlotsAndTheSameTableFromEvents) {
  Agent agent;
  const std::string scenario = Tmp("tiny.txtpb");
  WriteFile(scenario, TinyScenario(
                          "sweep { profiles: [\"glibc\", \"jemalloc\"] threads: [1, 2] repeats: 1 }"));
  const std::string out = Tmp("tiny-run");
  ServerProcess::Result r =
      Loadgen({"--scenario=" + scenario, "--agent=" + agent.address(), "--out=" + out});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("4 cells, 0 failed"));

  // Every record of every cell is tagged; each cell ends with its result.
  int results = 0;
  for (const Event& e : Events(out)) {
    if (e.has_header() || e.has_footer()) continue;
    ASSERT_FALSE(e.cell().empty()) << e.DebugString();
    EXPECT_EQ(e.cell(), absl::StrCat(e.profile(), "/t", e.threads(), "/r", e.repeat()));
    if (e.has_cell_result()) {
      ++results;
      EXPECT_TRUE(e.cell_result().ok()) << e.cell_result().error();
      EXPECT_EQ(e.cell_result().server().exit(), "exited 0");
      EXPECT_EQ(e.cell_result().server().threads(), e.threads());
    }
  }
  EXPECT_EQ(results, 4);

  // The table: every profile x threads, every column measured.
  const std::string csv = ReadFile(out + "/summary.csv");
  auto rows = Csv(csv);
  ASSERT_EQ(rows.size(), 5u) << csv;
  EXPECT_EQ(rows[0][4], "under_load_mib_median");
  std::vector<std::string> keys;
  for (size_t i = 1; i < rows.size(); ++i) {
    keys.push_back(rows[i][0] + "/" + rows[i][1]);
    EXPECT_EQ(rows[i][3], "1");
    for (size_t c = 0; c < rows[i].size(); ++c) {
      EXPECT_NE(rows[i][c], "-") << rows[0][c] << " missing for " << keys.back();
    }
  }
  EXPECT_THAT(keys, ::testing::ElementsAre("glibc/1", "glibc/2", "jemalloc/1", "jemalloc/2"));
  const std::string md = ReadFile(out + "/summary.md");
  EXPECT_THAT(md, HasSubstr("trim (global) MiB | trim (per-thread) MiB"));
  EXPECT_THAT(md, HasSubstr("## What to do"));
  EXPECT_THAT(md, HasSubstr("leanest under load"));
  EXPECT_THAT(md, HasSubstr("| jemalloc | "));  // the throughput-vs-glibc row
  // 1,500 fill requests never fill the 100 MiB cache: every row, the table
  // and the advice say so (docs/FILL.md).
  EXPECT_THAT(md, HasSubstr("| glibc | glibc 2."));  // the version each row ran
  EXPECT_THAT(md, HasSubstr(" | 1 | 1/1 | **NEVER FILLED** (1/1) |"));
  auto col = [&](const std::string& name) {
    const auto it = std::find(rows[0].begin(), rows[0].end(), name);
    EXPECT_NE(it, rows[0].end()) << name;
    return it - rows[0].begin();
  };
  EXPECT_EQ(rows[1][col("unfilled_cells")], "1");
  // The allocator each real server reported: glibc's gnu_get_libc_version(),
  // jemalloc's version mallctl.
  EXPECT_THAT(rows[1][col("allocator")], ::testing::StartsWith("glibc 2."));
  EXPECT_THAT(rows[3][col("allocator")], ::testing::StartsWith("jemalloc 5."));
  // One repeat: no spread to judge. The trim goal from each real server's
  // RSS before its first load (the fill set_phase's reply): a server with
  // its interpreter and threads up holds well over 10 MiB.
  EXPECT_EQ(rows[1][col("spread_over_20pct")], "n/a");
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_GT(std::stod(rows[i][col("base_rss_mib_median")]), 10.0) << keys[i - 1];
    EXPECT_LT(std::stod(rows[i][col("base_rss_mib_median")]),
              std::stod(rows[i][col("under_load_mib_median")]))
        << keys[i - 1] << ": the base is before any load";
    EXPECT_GT(std::stod(rows[i][col("trim_goal_median")]), 0.0) << keys[i - 1];
    EXPECT_THAT(rows[i][col("trim_goal_met")], ::testing::AnyOf("yes", "no"));
  }
  EXPECT_THAT(md, HasSubstr("| trim (per-thread) MiB | trim goal |"));
  const size_t advice = md.find("## What to do");
  ASSERT_NE(advice, std::string::npos);
  EXPECT_THAT(md.substr(advice),
              HasSubstr("**cache never filled: not seed 000's conditions** in glibc at 1 thread"));
  EXPECT_THAT(md.substr(advice), HasSubstr("With one repeat per cell no figure here can be checked"));
  EXPECT_THAT(md.substr(advice), HasSubstr("is stated at 64 threads, which this run did not measure"));
  ExpectPng(out + "/rss_under_load.png");
  ExpectPng(out + "/rss_after_shrink.png");

  // The aggregate as data: every cell and row of the table, and plots_and_advice.py's
  // advice quotes its numbers (the leanest under load at 2 threads).
  const std::string cells = ReadFile(out + "/cells.json");
  for (const std::string& k : keys) {
    const std::string profile = k.substr(0, k.find('/'));
    EXPECT_THAT(cells, HasSubstr("\"cell\": \"" + profile + "/t" + k.substr(k.find('/') + 1) +
                                 "/r1\""));
  }
  // (Medians equal to 0.1 MiB may go either way: both are then the leanest.)
  const std::string g2 = rows[2][col("under_load_mib_median")];
  const std::string j2 = rows[4][col("under_load_mib_median")];
  const size_t lean = std::stod(j2) < std::stod(g2) ? 4 : 2;
  EXPECT_THAT(md.substr(advice),
              g2 == j2 ? HasSubstr("** " + g2)
                       : HasSubstr("| 2 | **" + rows[lean][0] + "** " +
                                   rows[lean][col("under_load_mib_median")]));
  ServerProcess::Result py = Python({ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), out});
  ASSERT_EQ(py.exit_code, 0) << py.err;

  // So does `rsslab_loadgen report`, after the summaries are gone.
  ASSERT_EQ(unlink((out + "/summary.csv").c_str()), 0);
  ASSERT_EQ(unlink((out + "/summary.md").c_str()), 0);
  ServerProcess::Result rep = Loadgen({"report", out});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(ReadFile(out + "/summary.csv"), csv);
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("## What to do"));
}

TEST(SweepTest, CrashedCellIsRecordedAndTheOthersRun) {
  Agent agent;
  const std::string scenario = Tmp("crash.txtpb");
  // jemalloc is preloaded, so this handler exits its server on the first
  // request; glibc's cell must still run and count.
  WriteFile(scenario, TinyScenario("sweep { profiles: [\"jemalloc\", \"glibc\"] threads: [1] "
                                   "repeats: 1 handler: \"crash_under_preload\" }"));
  const std::string out = Tmp("crash-run");
  ServerProcess::Result r =
      Loadgen({"--scenario=" + scenario, "--agent=" + agent.address(), "--out=" + out});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("1 of 2 cells failed"));
  std::vector<Event> ev = Events(out);
  std::map<std::string, v1::CellResult> results;
  for (const Event& e : ev) {
    if (e.has_cell_result()) results[e.profile()] = e.cell_result();
  }
  ASSERT_EQ(results.size(), 2u);
  EXPECT_FALSE(results["jemalloc"].ok());
  // It died during the steps, before the sweep stopped it: marked so.
  EXPECT_EQ(results["jemalloc"].failed_at(), "died");
  EXPECT_TRUE(results["jemalloc"].died_before_stop());
  EXPECT_TRUE(results["jemalloc"].server().ended_before_stop());
  EXPECT_EQ(results["jemalloc"].server().exit(), "exited 3");
  EXPECT_EQ(results["jemalloc"].server().exit_code(), 3);
  EXPECT_THAT(results["jemalloc"].error(),
              HasSubstr(absl::StrCat("died before stop after ", results["jemalloc"].steps_done(),
                                     " of ", results["jemalloc"].steps_total(),
                                     " steps (server exited 3)")));
  EXPECT_TRUE(results["glibc"].ok()) << results["glibc"].error();
  const std::string md = ReadFile(out + "/summary.md");
  EXPECT_THAT(md, HasSubstr("**jemalloc/t1/r1** (died)"));
  EXPECT_THAT(md, ::testing::ContainsRegex("\\| glibc \\| glibc 2\\.[0-9]+ \\| 1 \\| 1/1 \\|"));
  EXPECT_THAT(md, ::testing::ContainsRegex(
                      "\\| jemalloc \\| jemalloc [0-9.]+ \\| 1 \\| 0/1 \\| - \\| - \\|"));
  const auto rows = Csv(ReadFile(out + "/summary.csv"));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[1][0], "jemalloc");
  EXPECT_EQ(rows[1][4], "-");  // a crashed process measures nothing
  EXPECT_EQ(rows[2][0], "glibc");
  EXPECT_NE(rows[2][4], "-");
}

TEST(SweepTest, ServerThatCannotStartIsRecordedWithItsLogTail) {
  Agent agent;
  const std::string scenario = Tmp("import.txtpb");
  WriteFile(scenario, TinyScenario("sweep { profiles: [\"glibc\"] threads: [1, 2] "
                                   "handler: \"import_error\" }"));
  const std::string out = Tmp("import-run");
  ServerProcess::Result r =
      Loadgen({"--scenario=" + scenario, "--agent=" + agent.address(), "--out=" + out});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  int failed = 0;
  for (const Event& e : Events(out)) {
    if (!e.has_cell_result()) continue;
    ++failed;
    EXPECT_FALSE(e.cell_result().ok());
    EXPECT_EQ(e.cell_result().failed_at(), "launch");
    EXPECT_THAT(e.cell_result().error(), HasSubstr("exited before it was ready"));
    EXPECT_THAT(e.cell_result().error(), HasSubstr("this_module_does_not_exist_rsslab"));
  }
  EXPECT_EQ(failed, 2);  // the sweep went on to the second cell
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("## Failed cells"));
}

TEST(SweepTest, UnknownProfileFailsBeforeAnyLaunch) {
  Agent agent;
  ServerProcess::Result r =
      Loadgen({"--builtin=sweep", "--profiles=glibc,no-such-profile", "--threads_list=1",
               "--agent=" + agent.address(), "--out=" + Tmp("unknown-run")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("has no profile no-such-profile"));
  for (const Event& e : Events(Tmp("unknown-run"))) EXPECT_FALSE(e.has_cell_result());
}

// --local launches through the agent's own launch path: a server flag the
// agent refuses (a handler path, an address, a flag the server lacks) is
// refused here too, before the run directory exists.
TEST(SweepTest, LocalRefusesTheServerFlagsTheAgentRefuses) {
  for (const char* flag : {"key: \"handler\" value: \"/tmp/x.py\"",
                           "key: \"listen\" value: \"0.0.0.0:1\"",
                           "key: \"LD_PRELOAD\" value: \"/tmp/x.so\"",
                           "key: \"churn_every\" value: \"0\""}) {
    const std::string scenario = Tmp("local-flags.txtpb");
    WriteFile(scenario, TinyScenario(absl::StrCat(
                            "sweep { profiles: [\"glibc\"] threads: [1] repeats: 1 server_flags { ",
                            flag, " } }")));
    const std::string out = Tmp("local-flags-run");
    ServerProcess::Result r =
        Loadgen({"--scenario=" + scenario, "--local", "--cells=0",
                 "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
                 "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
                 "--handler_dirs=" + DirOf(ServerProcess::Runfile("server/handlers/web_worker.py")),
                 "--out=" + out});
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("rsslab_loadgen: server flag ")) << flag;
    EXPECT_THAT(r.err, HasSubstr("nothing run")) << flag;
    EXPECT_EQ(access((out + "/events.jsonl").c_str(), F_OK), -1) << flag;
  }
}

TEST(SweepTest, SweepWithoutAgentIsAUsageError) {
  ServerProcess::Result r = Loadgen({"--builtin=sweep", "--out=" + Tmp("no-agent")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("give --agent=HOST:PORT"));
  ServerProcess::Result r2 = Loadgen({"--builtin=seed", "--repeats=3"});
  EXPECT_EQ(r2.exit_code, 2);
  EXPECT_THAT(r2.err, HasSubstr("shape a sweep"));
}

// A loadgen killed mid-sweep (SIGKILL, after the first cell finished): a
// rerun with --resume keeps every record, runs only the cells not done, and
// the table covers all of them. Without --resume the directory is refused.
TEST(SweepTest, KilledSweepResumesWithoutRerunningFinishedCells) {
  Agent agent;
  const std::string scenario = Tmp("resume.txtpb");
  WriteFile(scenario, TinyScenario(
                          "sweep { profiles: [\"glibc\", \"jemalloc\"] threads: [1, 2] repeats: 1 }"));
  const std::string out = Tmp("resume-run");
  const std::vector<std::string> args = {
      "--scenario=" + scenario, "--agent=" + agent.address(), "--out=" + out,
      "--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), "--progress=lines"};

  // The first run, killed as soon as one cell has its result.
  launch::SpawnOptions so;
  so.binary = ServerProcess::Runfile("loadgen/rsslab_loadgen");
  so.args = args;
  so.env = profiles::EnvStrings(profiles::CurrentEnviron());
  so.new_process_group = false;
  absl::StatusOr<pid_t> pid = launch::Spawn(so);
  ASSERT_TRUE(pid.ok()) << pid.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!absl::StrContains(ReadFile(out + "/events.jsonl"), "\"cell_result\"") &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  std::map<std::string, uint64_t> done;  // cell -> seq of its cell_result
  for (const Event& e : Events(out)) {
    if (e.has_cell_result() && e.cell_result().ok()) done[e.cell()] = e.seq();
    EXPECT_FALSE(e.has_footer());  // killed: no footer
  }
  ASSERT_GE(done.size(), 1u);
  ASSERT_LT(done.size(), 4u) << "the sweep finished before the kill";
  // As if the kill had cut a record short.
  const std::string torn = "{\"seq\":\"999\",\"cell\":\"jemalloc/t2/r1\",\"snap";
  { std::ofstream(out + "/events.jsonl", std::ios::app) << torn; }
  const std::string killed = ReadFile(out + "/events.jsonl");

  // Without --resume: refused, nothing written.
  ServerProcess::Result again = Loadgen(args);
  EXPECT_EQ(again.exit_code, 2) << again.err;
  EXPECT_THAT(again.err, HasSubstr("already holds a run"));
  EXPECT_THAT(again.err, HasSubstr("--resume"));
  // --resume with another matrix: refused, nothing written.
  std::vector<std::string> other = args;
  other.push_back("--resume");
  other.push_back("--threads_list=1");
  ServerProcess::Result mismatch = Loadgen(other);
  EXPECT_EQ(mismatch.exit_code, 2) << mismatch.err;
  EXPECT_THAT(mismatch.err, HasSubstr("the sweep matrix differs from the interrupted run's"));
  other = args;
  other.push_back("--resume");
  other.push_back("--scale=2");
  mismatch = Loadgen(other);
  EXPECT_EQ(mismatch.exit_code, 2) << mismatch.err;
  EXPECT_THAT(mismatch.err, HasSubstr("the load flags differ from the interrupted run's"));
  EXPECT_THAT(mismatch.err, HasSubstr("scale"));
  EXPECT_EQ(ReadFile(out + "/events.jsonl"), killed);

  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  ServerProcess::Result r = Loadgen(resume);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("resuming ", out, ": ", done.size(),
                                            " of 4 cells already done (kept)")));
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("cut a torn last line of ", torn.size(), " bytes")));
  EXPECT_THAT(r.out, HasSubstr("4 cells, 0 failed"));

  // Every line parses (Events checks each), the first run's complete lines
  // are all still there, and numbering goes on.
  const std::string text = ReadFile(out + "/events.jsonl");
  EXPECT_EQ(text.substr(0, killed.size() - torn.size()), killed.substr(0, killed.size() - torn.size()));
  std::vector<Event> ev = Events(out);
  uint64_t last_seq = 0;
  int resumed = 0;
  std::map<std::string, int> results;
  for (const Event& e : ev) {
    EXPECT_GT(e.seq(), last_seq);
    last_seq = e.seq();
    if (e.has_resumed()) {
      ++resumed;
      EXPECT_EQ(e.resumed().kept_cells_size(), static_cast<int>(done.size()));
      EXPECT_EQ(e.resumed().torn_bytes(), torn.size());
    }
    if (e.has_cell_result()) {
      ASSERT_TRUE(e.cell_result().ok()) << e.cell() << ": " << e.cell_result().error();
      ++results[e.cell()];
      // A finished cell keeps its one result; it never ran again.
      if (done.count(e.cell())) {
        EXPECT_EQ(e.seq(), done[e.cell()]) << e.cell();
      }
    }
    if (resumed > 0 && done.count(e.cell())) ADD_FAILURE() << "kept cell ran again: " << e.cell();
  }
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(results.size(), 4u);
  for (const auto& [cell, n] : results) EXPECT_EQ(n, 1) << cell;
  EXPECT_TRUE(ev.back().has_footer() && ev.back().footer().completed());

  // The table is complete, from all records; plots_and_advice.py reads it.
  const std::string csv = ReadFile(out + "/summary.csv");
  auto rows = Csv(csv);
  ASSERT_EQ(rows.size(), 5u) << csv;
  for (size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][2], "1") << csv;  // one cell per row: the killed attempt is superseded
    for (size_t c = 0; c < rows[i].size(); ++c) {
      EXPECT_NE(rows[i][c], "-") << rows[0][c] << " missing for " << rows[i][0] << "/" << rows[i][1];
    }
  }
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("Status: **completed**"));
  EXPECT_THAT(ReadFile(out + "/cells.json"), HasSubstr("\"complete\": true"));
  ServerProcess::Result py = Python({ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), out});
  ASSERT_EQ(py.exit_code, 0) << py.err;
}

}  // namespace
}  // namespace rsslab

namespace rsslab {
namespace {

// Two agents share a sweep, one cell each at a time. One agent dies while it
// runs a cell: that attempt is recorded as lost to its host, the cell runs
// again on the other agent, and the table is complete.
TEST(SweepTest, TwoAgentsShareTheCellsAndALostAgentsCellRunsElsewhere) {
  Agent a, b;
  const std::string scenario = Tmp("two.txtpb");
  // A 2 s idle wait: cells long enough to lose one mid-run.
  std::string text = TinyScenario(
      "sweep { profiles: [\"glibc\", \"jemalloc\"] threads: [1, 2] repeats: 1 }");
  text = absl::StrReplaceAll(text, {{"wait { seconds: 0.2 }", "wait { seconds: 2 }"}});
  WriteFile(scenario, text);
  const std::string out = Tmp("two-run");
  launch::SpawnOptions so;
  so.binary = ServerProcess::Runfile("loadgen/rsslab_loadgen");
  so.args = {"--scenario=" + scenario, "--agent=" + a.address() + "," + b.address(),
             "--out=" + out, "--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"),
             "--progress=lines"};
  so.env = profiles::EnvStrings(profiles::CurrentEnviron());
  so.new_process_group = false;
  absl::StatusOr<pid_t> pid = launch::Spawn(so);
  ASSERT_TRUE(pid.ok()) << pid.status();
  // Both agents hold a cell from the start; once two cells are into their
  // steps, agent b goes away.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  auto cells_begun = [&] {
    // Read while the loadgen writes: a last line may be incomplete.
    std::set<std::string> begun;
    for (absl::string_view line : absl::StrSplit(ReadFile(out + "/events.jsonl"), '\n')) {
      Event e;
      if (google::protobuf::util::JsonStringToMessage(std::string(line), &e).ok() &&
          e.has_step()) {
        begun.insert(e.cell());
      }
    }
    return begun.size();
  };
  while (cells_begun() < 2 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  b.Kill();
  int st = 0;
  waitpid(*pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << ReadFile(out + "/summary.md");

  std::map<std::string, int> attempts;
  int lost = 0;
  for (const Event& e : Events(out)) {
    if (!e.has_cell_result()) continue;
    ++attempts[e.cell()];
    const auto& r = e.cell_result();
    EXPECT_TRUE(e.has_cell_index());
    EXPECT_EQ(e.attempt(), attempts[e.cell()]);
    if (r.host_fault()) {
      ++lost;
      EXPECT_FALSE(r.ok());
      EXPECT_EQ(r.host().agent(), b.address());
      // The server b left behind.
      if (r.server().pid() > 0) kill(r.server().pid(), SIGKILL);
    } else {
      EXPECT_TRUE(r.ok()) << r.error();
    }
  }
  EXPECT_EQ(attempts.size(), 4u);
  EXPECT_EQ(lost, 1);
  const std::string md = ReadFile(out + "/summary.md");
  EXPECT_THAT(md, HasSubstr("Status: **completed**"));
  EXPECT_THAT(md, HasSubstr("## Attempts that do not count"));
  EXPECT_THAT(md, HasSubstr("agents lost: " + b.address()));
  for (const auto& row : Csv(ReadFile(out + "/summary.csv"))) EXPECT_NE(row[3], "0");
}

TEST(SweepTest, AgentListWithADuplicateOrAnUnreachableAgentRunsNothing) {
  Agent a;
  const std::vector<std::string> base = {"--builtin=sweep", "--profiles=glibc",
                                         "--threads_list=1", "--scale=0.01"};
  auto with = [&](const std::string& agents, const std::string& out) {
    std::vector<std::string> args = base;
    args.push_back("--agent=" + agents);
    args.push_back("--out=" + out);
    return Loadgen(args);
  };
  ServerProcess::Result dup = with(a.address() + "," + a.address(), Tmp("dup-run"));
  EXPECT_EQ(dup.exit_code, 2);
  EXPECT_THAT(dup.err, HasSubstr("is listed twice"));
  ServerProcess::Result gone = with(a.address() + ",127.0.0.1:1", Tmp("gone-run"));
  EXPECT_EQ(gone.exit_code, 2);
  EXPECT_THAT(gone.err, HasSubstr("cannot reach rsslab_agent at 127.0.0.1:1"));
  EXPECT_EQ(std::count(gone.err.begin(), gone.err.end(), '\n'), 1) << gone.err;
  // Nothing run: not even a run directory.
  EXPECT_NE(access(Tmp("dup-run").c_str(), F_OK), 0);
  EXPECT_NE(access(Tmp("gone-run").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace rsslab

namespace rsslab {
namespace {

// Hardening class 8 (docs/RELIABILITY.md): a batch task's cell (--local --cell_index_env
// --results_dir, as deploy/slurm and deploy/k8s run it) killed mid-cell
// and rerun with the very same command resumes in its own directory: one
// directory per cell, the killed attempt's records kept, a finished cell
// never run again, a second rerun runs nothing, a task running the same
// cell at the same time is refused, and merge gives the complete table with
// each cell counted once.
TEST(SweepTest, KilledBatchCellResumesInPlaceAndMergesOnce) {
  const std::string scenario = Tmp("batch.txtpb");
  std::string text = TinyScenario("sweep { profiles: [\"glibc\"] threads: [1, 2] repeats: 1 }");
  // Long enough to be killed in the middle.
  text = absl::StrReplaceAll(text, {{"wait { seconds: 0.2 }", "wait { seconds: 2 }"}});
  WriteFile(scenario, text);
  const std::string results = Tmp("batch-cells");
  const std::vector<std::string> cmd = {
      "--scenario=" + scenario, "--local", "--cell_index_env=RSSLAB_TEST_INDEX",
      "--results_dir=" + results,
      "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
      "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
      "--handler_dirs=" + DirOf(ServerProcess::Runfile("server/handlers/web_worker.py")),
      "--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), "--progress=lines"};
  auto run_cell = [&](const std::string& index) {
    return ServerProcess::Run(ServerProcess::Runfile("loadgen/rsslab_loadgen"), cmd,
                              {{"RSSLAB_TEST_INDEX", index}}, absl::Seconds(120));
  };
  auto dirs = [&] {
    std::vector<std::string> out;
    if (DIR* d = opendir(results.c_str())) {
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') out.push_back(e->d_name);
      }
      closedir(d);
    }
    std::sort(out.begin(), out.end());
    return out;
  };

  ServerProcess::Result one = run_cell("1");
  ASSERT_EQ(one.exit_code, 0) << one.err << one.out;
  ASSERT_EQ(dirs().size(), 1u);
  const std::string dir1 = results + "/" + dirs()[0];
  EXPECT_THAT(dirs()[0], ::testing::StartsWith("cell-1-"));

  // Cell 0, killed outright once its steps have begun.
  launch::SpawnOptions so;
  so.binary = ServerProcess::Runfile("loadgen/rsslab_loadgen");
  so.args = cmd;
  so.env = profiles::EnvStrings(profiles::CurrentEnviron());
  so.env.push_back("RSSLAB_TEST_INDEX=0");
  so.new_process_group = false;
  absl::StatusOr<pid_t> pid = launch::Spawn(so);
  ASSERT_TRUE(pid.ok()) << pid.status();
  std::string dir0;
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (absl::Now() < deadline) {
    for (const std::string& d : dirs()) {
      if (absl::StartsWith(d, "cell-0-") &&
          absl::StrContains(ReadFile(results + "/" + d + "/events.jsonl"), "\"step\":{\"step\"")) {
        dir0 = results + "/" + d;
      }
    }
    if (!dir0.empty()) break;
    absl::SleepFor(absl::Milliseconds(20));  // polling a file another process writes
  }
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  ASSERT_FALSE(dir0.empty()) << "cell 0 never began";
  for (const Event& e : Events(dir0)) {
    ASSERT_FALSE(e.has_cell_result()) << "cell 0 finished before the kill";
  }

  // The same command again: resumed in place, no new directory.
  ServerProcess::Result again = run_cell("0");
  ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
  EXPECT_THAT(again.err, HasSubstr(absl::StrCat("resuming ", dir0, ": 0 of 1 cells already done")));
  EXPECT_EQ(dirs().size(), 2u);
  int results0 = 0, resumed = 0;
  for (const Event& e : Events(dir0)) {
    resumed += e.has_resumed() ? 1 : 0;
    if (e.has_cell_result()) {
      ++results0;
      EXPECT_TRUE(e.cell_result().ok()) << e.cell_result().error();
    }
  }
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(results0, 1);

  // Once more, and for the finished cell 1: nothing runs, nothing is written.
  const std::string events0 = ReadFile(dir0 + "/events.jsonl");
  const std::string events1 = ReadFile(dir1 + "/events.jsonl");
  for (const auto& [index, events, dir] :
       {std::make_tuple("0", events0, dir0), std::make_tuple("1", events1, dir1)}) {
    ServerProcess::Result done = run_cell(index);
    EXPECT_EQ(done.exit_code, 0) << done.err;
    EXPECT_THAT(done.err, HasSubstr("already holds a result for every cell")) << done.err;
    EXPECT_EQ(ReadFile(dir + "/events.jsonl"), events) << dir;
  }
  EXPECT_EQ(dirs().size(), 2u);

  // A second task given the same cell while one runs it: refused.
  {
    const int fd = open((dir1 + "/lock").c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
    ServerProcess::Result busy = run_cell("1");
    EXPECT_EQ(busy.exit_code, 2) << busy.err;
    EXPECT_THAT(busy.err, HasSubstr("another rsslab_loadgen is running these cells"));
    close(fd);
  }
  EXPECT_EQ(ReadFile(dir1 + "/events.jsonl"), events1);

  // Merged (the results directory and one cell's directory again): the
  // table is complete, each cell counted once; the killed attempt is kept
  // as one that does not count.
  const std::string merged = Tmp("batch-merged");
  ServerProcess::Result m = ServerProcess::Run(ServerProcess::Runfile("loadgen/rsslab_loadgen"),
                                               {"merge", "--out=" + merged, results, dir0});
  ASSERT_EQ(m.exit_code, 0) << m.err << m.out;
  std::map<std::string, std::vector<bool>> attempts;  // cell -> ok of each result
  for (const Event& e : Events(merged)) {
    if (e.has_cell_result()) attempts[e.cell()].push_back(e.cell_result().ok());
  }
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts["glibc/t1/r1"], (std::vector<bool>{false, true}));
  EXPECT_EQ(attempts["glibc/t2/r1"], (std::vector<bool>{true}));
  const std::string csv = ReadFile(merged + "/summary.csv");
  auto rows = Csv(csv);
  ASSERT_EQ(rows.size(), 3u) << csv;
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_EQ(rows[i][2], "1") << csv;
  const std::string md = ReadFile(merged + "/summary.md");
  EXPECT_THAT(md, HasSubstr("Status: **completed**"));
  EXPECT_THAT(md, HasSubstr("glibc/t1/r1 attempt 1: failed: no result in"));
}

}  // namespace
}  // namespace rsslab
