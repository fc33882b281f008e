#include "loadgen/results/soak_analysis.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadgen/results/summary.h"
#include "loadgen/results/summary_render.h"

namespace rsslab {
namespace {

SoakCycle IdleCycle(int cycle, double rss_mib, int threads, int arenas) {
  SoakCycle c;
  c.cycle = cycle;
  c.post_idle_rss = static_cast<int64_t>(rss_mib * 1048576);
  c.threads = threads;
  c.arenas = arenas;
  return c;
}

TEST(SoakGrowth, ComparesWithPreviousAndFirstAndFlagsGrowthOverThreshold) {
  std::vector<SoakCycle> cycles = {
      IdleCycle(0, 100, 10, 4), IdleCycle(1, 104, 10, 4),
      IdleCycle(2, 113, 10, 5),  // +9 MiB > 8: flagged
      IdleCycle(3, 112, 11, 5),  // shrinks, but one more thread: flagged
  };
  ComputeSoakGrowth(8, &cycles);
  EXPECT_FALSE(cycles[0].has_prev);
  EXPECT_FALSE(cycles[0].flagged);
  EXPECT_EQ(cycles[1].growth_prev, 4 << 20);
  EXPECT_EQ(cycles[1].growth_first, 4 << 20);
  EXPECT_FALSE(cycles[1].flagged);
  EXPECT_EQ(cycles[2].growth_prev, 9 << 20);
  EXPECT_EQ(cycles[2].growth_first, 13 << 20);
  EXPECT_EQ(cycles[2].arena_change, 1);
  EXPECT_TRUE(cycles[2].flagged);
  EXPECT_THAT(cycles[2].flag_reason, ::testing::HasSubstr("+9.0 MiB > 8.0 MiB"));
  EXPECT_EQ(cycles[3].growth_prev, -(1 << 20));
  EXPECT_EQ(cycles[3].thread_change, 1);
  EXPECT_TRUE(cycles[3].flagged);
  EXPECT_THAT(cycles[3].flag_reason, ::testing::HasSubstr("threads +1"));
  EXPECT_THAT(SoakCycleLine(cycles[3]), ::testing::HasSubstr("FLAGGED"));
  // Exactly the threshold is not "more than" it.
  std::vector<SoakCycle> edge = {IdleCycle(0, 100, 4, 1), IdleCycle(1, 108, 4, 1)};
  ComputeSoakGrowth(8, &edge);
  EXPECT_FALSE(edge[1].flagged);
}

TEST(SoakGrowth, ACycleCutShortIsSkippedNotComparedAsZero) {
  std::vector<SoakCycle> cycles = {IdleCycle(0, 100, 4, 1), SoakCycle{},
                                   IdleCycle(2, 101, 4, 1)};
  cycles[1].cycle = 1;
  ComputeSoakGrowth(8, &cycles);
  EXPECT_FALSE(cycles[1].has_prev);
  EXPECT_FALSE(cycles[1].flagged);
  EXPECT_EQ(cycles[2].growth_prev, 1 << 20);  // against cycle 0
}

rsslab::v1::Event SoakEvent(int cycle, const std::string& phase,
                            const std::string& label, double rss_mib, int threads) {
  rsslab::v1::Event e;
  e.set_cycle(cycle);
  e.set_loadgen_phase(phase);
  e.set_label(label);
  e.set_unix_nanos(1000 + cycle);
  e.mutable_snapshot()->mutable_status()->set_rss_bytes(
      static_cast<int64_t>(rss_mib * 1048576));
  e.mutable_snapshot()->mutable_status()->set_threads(threads);
  return e;
}

TEST(SoakSummaryBuilder, BuildsCyclesFromRecordsIgnoringWatchForPhaseEnds) {
  SummaryBuilder b;
  rsslab::v1::Event h;
  h.mutable_header()->mutable_scenario()->mutable_soak()->set_growth_threshold_mb(2);
  b.Add(h);
  b.Add(SoakEvent(0, "fill", "after_fill", 50, 8));
  b.Add(SoakEvent(0, "idle", "after_idle", 40, 8));
  b.Add(SoakEvent(0, "idle", "watch", 999, 8));  // not a phase end
  b.Add(SoakEvent(1, "fill", "after_fill", 52, 8));
  b.Add(SoakEvent(1, "idle", "after_idle", 43, 8));
  rsslab::v1::Event lost;
  lost.set_unix_nanos(5000);
  lost.mutable_server_lost()->set_unix_nanos(5000);
  lost.mutable_server_lost()->set_error("UNAVAILABLE: Socket closed");
  b.Add(lost);
  const SoakSummary& k = b.summary().soak;
  ASSERT_TRUE(k.enabled);
  EXPECT_EQ(k.threshold_mb, 2);
  EXPECT_EQ(k.watch_records, 1u);
  ASSERT_EQ(k.cycles.size(), 2u);
  EXPECT_EQ(k.cycles[0].post_idle_rss, 40 << 20);
  EXPECT_EQ(k.cycles[1].rss.at("fill"), 52 << 20);
  EXPECT_EQ(k.cycles[1].growth_prev, 3 << 20);
  EXPECT_TRUE(k.cycles[1].flagged);
  EXPECT_EQ(k.flagged, 1);
  EXPECT_TRUE(k.server_lost);
  EXPECT_EQ(k.lost_error, "UNAVAILABLE: Socket closed");
  const std::string md = SummaryMarkdown(b.summary(), "dir");
  EXPECT_THAT(md, ::testing::HasSubstr("## Soak: per cycle"));
  EXPECT_THAT(md, ::testing::HasSubstr("SERVER LOST"));
  EXPECT_THAT(SoakCyclesCsv(k), ::testing::HasSubstr("2,52.0,-,43.0,-,+3.0,+3.0,8,0"));
  const std::string text = SoakText(k);
  EXPECT_THAT(text, ::testing::HasSubstr("soak: 2 cycles, 1 flagged, 1 watch records\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("soak: SERVER LOST at 1970-01-01 00:00:00.000 UTC: "
                                         "UNAVAILABLE: Socket closed; last snapshot at "));
}

// A service's idle record: its total RSS and each process's (MiB).
rsslab::v1::Event ServiceIdle(int cycle, std::vector<std::pair<int, double>> procs) {
  rsslab::v1::Event e = SoakEvent(cycle, "idle", "after_idle", 0, 30);
  auto* m = e.mutable_snapshot()->mutable_service();
  int64_t total = 0;
  for (const auto& [pid, mib] : procs) {
    auto* p = m->add_processes();
    p->set_pid(pid);
    p->set_role(pid == 10 ? "master" : "worker");
    p->set_rss_bytes(static_cast<int64_t>(mib * 1048576));
    total += p->rss_bytes();
  }
  m->set_rss_bytes(total);
  e.mutable_snapshot()->mutable_status()->set_rss_bytes(total);
  return e;
}

TEST(SoakSummaryBuilder, AServiceIsJudgedOnItsTotalAndTheProcessThatGrewIsNamed) {
  SummaryBuilder b;
  rsslab::v1::Event h;
  h.mutable_header()->mutable_scenario()->mutable_soak()->set_growth_threshold_mb(4);
  b.Add(h);
  b.Add(ServiceIdle(0, {{10, 20}, {11, 40}, {12, 40}}));
  b.Add(ServiceIdle(1, {{10, 20}, {11, 43}, {12, 43}}));  // +6 in all, +3 each
  b.Add(ServiceIdle(2, {{10, 21}, {11, 44}, {12, 53}}));  // +11: worker 12
  const SoakSummary& k = b.summary().soak;
  ASSERT_EQ(k.cycles.size(), 3u);
  EXPECT_EQ(k.cycles[1].growth_prev, 6 << 20);
  EXPECT_TRUE(k.cycles[1].flagged);  // no single process grew 4 MiB: the total did
  EXPECT_TRUE(k.cycles[2].flagged);
  EXPECT_THAT(k.cycles[2].flag_reason,
              ::testing::HasSubstr("+12.0 MiB > 4.0 MiB; most in worker pid 12 (+10.0 MiB)"));
}

}  // namespace
}  // namespace rsslab
