// The soak end to end against a real rsslab_server: a few short cycles
// with a fast watch stream (records, per-cycle growth table, plots, report
// rebuilding it), and a server killed mid-soak (non-zero exit, the loss
// reported with its time and the last snapshot, records intact).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Child;
using ::rsslab::testing::Events;
using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::ServerProcess;
using ::rsslab::testing::StartServer;
using ::rsslab::testing::Tmp;
using ::rsslab::v1::Event;
using ::testing::HasSubstr;

// The built-in soak's cycle, small enough for a test: fill long enough
// (~0.5 s) that watch intervals fall inside load steps.
std::string SoakFile() {
  const std::string path = Tmp("soak.txtpb");
  std::ofstream(path) << R"pb(
name: "soak"
soak { watch_interval_s: 0.2 growth_threshold_mb: 8 }
step { name: "soak" repeat { duration_s: 3600
  step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 100 } }
  step { name: "fill" load { requests: 1000 } }
  step { name: "after_fill" snapshot { gc: true } }
  step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: 10 } }
  step { name: "shrink" load { requests: 300 } }
  step { name: "after_shrink" snapshot { gc: true } }
  step { name: "idle" set_phase { phase: "idle" } }
  step { name: "idle" wait { seconds: 0.2 } }
  step { name: "after_idle" snapshot { gc: true } }
  step { name: "trim" set_phase { phase: "trim" gc: true } }
} }
)pb";
  return path;
}

std::vector<std::string> Args(const ServerProcess& s, const std::string& out,
                              const std::string& duration) {
  return {"--target=" + s.data_address(), "--control=" + s.control_address(),
          "--scenario=" + SoakFile(), "--duration=" + duration,
          "--progress=lines", "--out=" + out,
          "--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py")};
}

void ExpectPng(const std::string& path) {
  const std::string png = ReadFile(path);
  ASSERT_GT(png.size(), 1000u) << path;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
}

std::vector<std::vector<std::string>> CsvRows(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
    rows.push_back(absl::StrSplit(line, ','));
  }
  return rows;
}

TEST(SoakE2E, ShortSoakRecordsWatchCyclesGrowthAndPlots) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("soak_ok");
  // Long enough for two cycles on a loaded 2-core machine (one took 2.3 s).
  auto r = ServerProcess::Run(Loadgen(), Args(*server, out, "6s"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("[soak] cycle 1:"));
  EXPECT_THAT(r.err, HasSubstr("[soak] cycle 2:"));
  EXPECT_THAT(r.out, HasSubstr("soak: "));

  const auto ev = Events(out);
  int watch = 0, with_latency = 0, max_cycle = 0, load_intervals = 0;
  for (const auto& e : ev) {
    if (e.has_snapshot() && e.label() == "watch") {
      ++watch;
      EXPECT_GT(e.snapshot().status().rss_bytes(), 0);
      if (e.interval_latency().count() > 0) ++with_latency;
    }
    if (e.has_load()) load_intervals += e.load().intervals_size();
    max_cycle = std::max(max_cycle, e.cycle());
    EXPECT_FALSE(e.has_server_lost());
  }
  // 2.5 s at 0.2 s: about 12; a loaded machine may deliver fewer.
  EXPECT_GE(watch, 5);
  EXPECT_GE(with_latency, 1);
  EXPECT_GE(load_intervals, 1);
  EXPECT_GE(max_cycle, 1);  // at least two cycles, cut by --duration
  ASSERT_TRUE(ev.back().has_footer());
  EXPECT_TRUE(ev.back().footer().completed());

  // Per-cycle rows: the second compares with the first.
  const auto rows = CsvRows(out + "/soak_cycles.csv");
  ASSERT_GE(rows.size(), 3u);
  ASSERT_EQ(rows[0][5], "growth_prev_mib");
  EXPECT_EQ(rows[1][5], "-");
  EXPECT_NE(rows[2][5], "-");
  EXPECT_NE(rows[2][3], "-");  // post-idle RSS
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("## Soak: per cycle"));
  ExpectPng(out + "/rss_over_time.png");
  ExpectPng(out + "/post_idle_per_cycle.png");

  // `report` rebuilds the same table from events.jsonl alone.
  const std::string csv = ReadFile(out + "/soak_cycles.csv");
  unlink((out + "/soak_cycles.csv").c_str());
  unlink((out + "/rss_over_time.png").c_str());
  auto rep = ServerProcess::Run(
      Loadgen(), {"--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), "report", out});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_EQ(ReadFile(out + "/soak_cycles.csv"), csv);
  ExpectPng(out + "/rss_over_time.png");
  EXPECT_EQ(server->Stop(), 0);
}

TEST(SoakE2E, ServerKilledMidSoakIsReportedWithTimeAndLastSnapshot) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("soak_killed");
  auto args = Args(*server, out, "10m");
  args.push_back("--connect_timeout=2s");
  args.push_back("--deadline_ms=3000");
  Child lg(Loadgen(), args);
  ASSERT_TRUE(lg.WaitForStderr("[soak] cycle 1:", absl::Seconds(30))) << lg.Stderr();
  const absl::Time killed = absl::Now();
  ASSERT_EQ(kill(server->pid(), SIGKILL), 0);
  EXPECT_EQ(lg.Wait(absl::Seconds(30)), 1) << lg.Stderr();
  EXPECT_THAT(lg.Stderr(), HasSubstr("SERVER LOST"));
  EXPECT_THAT(lg.Stdout(), HasSubstr("soak: SERVER LOST at"));

  const auto ev = Events(out);
  const Event* lost = nullptr;
  int watch = 0;
  for (const auto& e : ev) {
    if (e.has_server_lost()) lost = &e;
    if (e.has_snapshot() && e.label() == "watch") ++watch;
  }
  EXPECT_GE(watch, 1);
  ASSERT_NE(lost, nullptr);
  const absl::Time at = absl::FromUnixNanos(lost->server_lost().unix_nanos());
  EXPECT_GE(at, killed - absl::Seconds(1));
  EXPECT_LE(at, killed + absl::Seconds(10));
  ASSERT_TRUE(lost->server_lost().has_last_snapshot());
  EXPECT_GT(lost->server_lost().last_snapshot().status().rss_bytes(), 0);
  EXPECT_LE(absl::FromUnixNanos(lost->server_lost().last_snapshot_unix_nanos()), at);
  ASSERT_TRUE(ev.back().has_footer());
  EXPECT_FALSE(ev.back().footer().completed());
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("SERVER LOST"));

  // From events.jsonl alone: the finished cycle's row and the loss.
  unlink((out + "/soak_cycles.csv").c_str());
  unlink((out + "/summary.md").c_str());
  auto rep = ServerProcess::Run(
      Loadgen(), {"--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), "report", out});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_THAT(rep.out, HasSubstr("SERVER LOST"));
  const auto rows = CsvRows(out + "/soak_cycles.csv");
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[1][0], "1");
  EXPECT_NE(rows[1][3], "-");
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("Last snapshot before the server was lost"));
  ExpectPng(out + "/rss_over_time.png");
}

TEST(SoakE2E, LoadgenKilledMidSoakKeepsEveryRecordAndReportRebuildsTheTable) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("soak_lg_killed");
  Child lg(Loadgen(), Args(*server, out, "10m"));
  ASSERT_TRUE(lg.WaitForStderr("[soak] cycle 2:", absl::Seconds(30))) << lg.Stderr();
  lg.Kill();
  // A record can exceed stdio's buffer (two write()s), so SIGKILL may tear
  // the last line; only that one may fail to parse.
  std::vector<Event> ev;
  std::vector<std::string> lines =
      absl::StrSplit(ReadFile(out + "/events.jsonl"), '\n', absl::SkipEmpty());
  for (size_t i = 0; i < lines.size(); ++i) {
    Event e;
    const bool ok = google::protobuf::util::JsonStringToMessage(lines[i], &e).ok();
    EXPECT_TRUE(ok || i + 1 == lines.size()) << lines[i];
    if (ok) ev.push_back(e);
  }
  ASSERT_FALSE(ev.empty());
  EXPECT_FALSE(ev.back().has_footer());
  int watch = 0;
  for (const auto& e : ev) watch += e.has_snapshot() && e.label() == "watch";
  EXPECT_GE(watch, 1);
  auto rep = ServerProcess::Run(
      Loadgen(), {"--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"), "report", out});
  ASSERT_EQ(rep.exit_code, 0) << rep.err;
  EXPECT_THAT(rep.out, HasSubstr("cycle 2: "));
  const auto rows = CsvRows(out + "/soak_cycles.csv");
  ASSERT_GE(rows.size(), 3u);
  EXPECT_NE(rows[2][5], "-");  // cycle 2's growth against cycle 1
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("INCOMPLETE"));
  ExpectPng(out + "/post_idle_per_cycle.png");
  EXPECT_EQ(server->Stop(), 0);
}

TEST(SoakE2E, KilledSoakResumesIntoTheSameRunAndItsClock) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("soak_resumed");
  const absl::Time started = absl::Now();
  {
    // Killed once its first cycle is done: the resume must still find time
    // left on the first start's clock for a new cycle. Under ASan on a
    // loaded machine a cycle took about 5 s, and a kill after the second
    // left none of the 12 s (docs/TESTING.md#sanitizers).
    Child lg(Loadgen(), Args(*server, out, "12s"));
    ASSERT_TRUE(lg.WaitForStderr("[soak] cycle 1:", absl::Seconds(30))) << lg.Stderr();
    lg.Kill();
  }
  int before_cycle = 0;
  size_t before_records = 0;
  {
    // Every complete line of the killed run (a torn last one aside).
    std::vector<std::string> lines =
        absl::StrSplit(ReadFile(out + "/events.jsonl"), '\n', absl::SkipEmpty());
    for (const auto& line : lines) {
      Event e;
      if (!google::protobuf::util::JsonStringToMessage(line, &e).ok()) continue;
      ++before_records;
      if (!e.loadgen_phase().empty()) before_cycle = std::max(before_cycle, e.cycle());
    }
  }
  // Without --resume the run directory is refused, untouched.
  auto refused = ServerProcess::Run(Loadgen(), Args(*server, out, "12s"));
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  // A changed --duration is another soak: refused too.
  auto args = Args(*server, out, "13s");
  args.push_back("--resume");
  auto other = ServerProcess::Run(Loadgen(), args);
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_THAT(other.err, HasSubstr("differ"));

  args = Args(*server, out, "12s");
  args.push_back("--resume");
  auto r = ServerProcess::Run(Loadgen(), args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("resuming the soak"));
  // The soak's clock is the first start's: 12 s from then, not from now.
  EXPECT_LT(absl::Now() - started, absl::Seconds(12) + absl::Seconds(25));

  const auto ev = Events(out);  // every line parses now (a torn one was cut)
  ASSERT_GT(ev.size(), before_records);
  int headers = 0, resumed = 0, max_cycle = 0;
  bool after_resume_cycle_seen = false, seen_resumed = false;
  for (const auto& e : ev) {
    headers += e.has_header();
    if (e.has_resumed()) {
      ++resumed;
      seen_resumed = true;
    }
    if (!e.loadgen_phase().empty()) {
      max_cycle = std::max(max_cycle, e.cycle());
      // Records after the resume belong to new cycles only.
      if (seen_resumed) {
        EXPECT_GT(e.cycle(), before_cycle);
        after_resume_cycle_seen = true;
      }
    }
  }
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(resumed, 1);
  EXPECT_TRUE(after_resume_cycle_seen);
  ASSERT_TRUE(ev.back().has_footer());
  EXPECT_TRUE(ev.back().footer().completed());
  // One table for the whole soak: the killed run's cycles and the new ones.
  const auto rows = CsvRows(out + "/soak_cycles.csv");
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[1][0], "1");
  EXPECT_EQ(rows.back()[0], absl::StrCat(max_cycle + 1));
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace rsslab
