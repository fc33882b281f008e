// The sweep table's arithmetic: medians and ranges over repeats, the two
// trim columns, failed cells kept out of the medians, CSV layout, memory
// figures whose repeats spread by more than 20 % marked, the trim goal.
#include "loadgen/results/sweep_summary.h"

#include <algorithm>
#include <map>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "loadgen/results/fill_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMiB = 1048576.0;

TEST(AggregateTest, OddCountTakesTheMiddle) {
  Aggregate a = AggregateValues({5, 1, 3});
  EXPECT_EQ(a.n, 3);
  EXPECT_EQ(a.median, 3);
  EXPECT_EQ(a.min, 1);
  EXPECT_EQ(a.max, 5);
}

TEST(AggregateTest, EvenCountAveragesTheMiddleTwo) {
  Aggregate a = AggregateValues({10, 2, 4, 8});
  EXPECT_EQ(a.n, 4);
  EXPECT_EQ(a.median, 6);
  EXPECT_EQ(a.min, 2);
  EXPECT_EQ(a.max, 10);
}

TEST(AggregateTest, MissingValuesAreIgnored) {
  Aggregate a = AggregateValues({-1, 7, -1});
  EXPECT_EQ(a.n, 1);
  EXPECT_EQ(a.median, 7);
  EXPECT_EQ(AggregateValues({-1}).n, 0);
  EXPECT_EQ(AggregateValues({}).n, 0);
}

Event Tagged(const std::string& profile, int threads, int repeat, const std::string& phase) {
  Event e;
  e.set_cell(profile + "/t" + std::to_string(threads) + "/r" + std::to_string(repeat));
  e.set_profile(profile);
  e.set_threads(threads);
  e.set_repeat(repeat);
  e.set_loadgen_phase(phase);
  return e;
}

// One cell's records as the runner writes them, RSS in MiB.
void AddCell(std::vector<Event>* ev, const std::string& profile, int threads, int repeat,
             double fill, double shrink, double idle, double between, double after,
             double qps, double p99_us, bool ok = true, double fill_stored_mib = 350,
             double base_mib = 0) {
  if (base_mib > 0) {  // the fill set_phase's reply: RSS before any load
    Event e = Tagged(profile, threads, repeat, "fill");
    e.mutable_phase()->mutable_snapshot()->mutable_status()->set_rss_bytes(
        static_cast<int64_t>(base_mib * kMiB));
    ev->push_back(e);
  }
  auto snap = [&](const std::string& phase, double rss, double hwm) {
    Event e = Tagged(profile, threads, repeat, phase);
    e.mutable_snapshot()->mutable_status()->set_rss_bytes(static_cast<int64_t>(rss * kMiB));
    e.mutable_snapshot()->mutable_status()->set_hwm_bytes(static_cast<int64_t>(hwm * kMiB));
    if (phase == "fill") {  // the cache's counters at the end of the fill
      auto* c = e.mutable_snapshot()->mutable_cache();
      c->set_cache_limit_bytes(static_cast<int64_t>(100 * kMiB));
      c->set_cache_bytes(static_cast<int64_t>(std::min(fill_stored_mib, 100.0) * kMiB));
      c->set_evicted_bytes(static_cast<int64_t>(std::max(fill_stored_mib - 100, 0.0) * kMiB));
      c->set_evictions(fill_stored_mib > 100 ? 1000 : 0);
    }
    ev->push_back(e);
  };
  Event load = Tagged(profile, threads, repeat, "fill");
  load.mutable_load()->set_qps(qps);
  load.mutable_load()->mutable_latency()->set_p99_us(p99_us);
  ev->push_back(load);
  snap("fill", fill, fill + 10);
  Event shrink_load = Tagged(profile, threads, repeat, "shrink");
  shrink_load.mutable_load()->set_qps(qps * 100);  // not the fill phase: ignored
  ev->push_back(shrink_load);
  snap("shrink", shrink, fill + 10);
  snap("idle", idle, fill + 10);
  Event trim = Tagged(profile, threads, repeat, "trim");
  auto* ph = trim.mutable_phase();
  ph->mutable_before()->mutable_status()->set_rss_bytes(static_cast<int64_t>(idle * kMiB));
  ph->mutable_snapshot()->mutable_status()->set_rss_bytes(static_cast<int64_t>(after * kMiB));
  ph->mutable_trim()->set_per_thread(true);
  ph->mutable_trim()->set_rss_between_bytes(static_cast<int64_t>(between * kMiB));
  ph->mutable_trim()->set_rss_after_bytes(static_cast<int64_t>(after * kMiB));
  ev->push_back(trim);
  Event done = Tagged(profile, threads, repeat, "trim");
  done.mutable_cell_result()->set_ok(ok);
  if (!ok) {
    done.mutable_cell_result()->set_failed_at("exit");
    done.mutable_cell_result()->set_error("server killed by SIGSEGV");
    done.mutable_cell_result()->mutable_server()->set_exit("killed by SIGSEGV");
    done.mutable_cell_result()->mutable_server()->set_log_tail("line one\nSegmentation fault\n");
  }
  ev->push_back(done);
}

std::vector<Event> ThreeRepeats() {
  std::vector<Event> ev;
  Event h;
  h.mutable_header()->set_scenario_name("sweep");
  h.mutable_header()->mutable_scenario()->mutable_sweep()->add_profiles("jemalloc");
  h.mutable_header()->mutable_scenario()->mutable_sweep()->add_profiles("glibc");
  ev.push_back(h);
  AddCell(&ev, "glibc", 1, 1, 120, 110, 110, 30, 25, 1000, 2000);
  AddCell(&ev, "glibc", 1, 2, 130, 115, 114, 32, 27, 1200, 3000);
  AddCell(&ev, "glibc", 1, 3, 125, 112, 111, 31, 26, 1100, 2500);
  AddCell(&ev, "jemalloc", 1, 1, 140, 45, 44, 40, 40, 900, 4000);
  // A crashed cell: its (absurd) numbers must stay out of the medians.
  AddCell(&ev, "jemalloc", 1, 2, 999, 999, 999, 999, 999, 1, 1, /*ok=*/false);
  Event f;
  f.mutable_footer()->set_completed(true);
  ev.push_back(f);
  return ev;
}

TEST(SweepSummaryTest, MediansAndRangesPerProfileAndThreads) {
  const std::vector<Event> ev = ThreeRepeats();
  ASSERT_TRUE(IsSweepRun(ev));
  SweepSummary s = BuildSweepSummary(ev);
  ASSERT_EQ(s.cells.size(), 5u);
  EXPECT_EQ(s.failed_cells, 1);
  ASSERT_EQ(s.rows.size(), 2u);
  // The header's matrix order, not alphabetical.
  EXPECT_EQ(s.rows[0].profile, "jemalloc");
  const SweepRow& g = s.rows[1];
  EXPECT_EQ(g.profile, "glibc");
  EXPECT_EQ(g.cells, 3);
  EXPECT_EQ(g.ok_cells, 3);
  EXPECT_EQ(g.metric[kUnderLoad].median, 125 * kMiB);
  EXPECT_EQ(g.metric[kUnderLoad].min, 120 * kMiB);
  EXPECT_EQ(g.metric[kUnderLoad].max, 130 * kMiB);
  EXPECT_EQ(g.metric[kAfterShrink].median, 112 * kMiB);
  EXPECT_EQ(g.metric[kAfterIdle].median, 111 * kMiB);
  EXPECT_EQ(g.metric[kTrimGlobal].median, 31 * kMiB);
  EXPECT_EQ(g.metric[kTrimPerThread].median, 26 * kMiB);
  EXPECT_EQ(g.metric[kHwm].max, 140 * kMiB);
  EXPECT_EQ(g.metric[kQps].median, 1100);
  EXPECT_EQ(g.metric[kP99].median, 2500);
  const SweepRow& j = s.rows[0];
  EXPECT_EQ(j.cells, 2);
  EXPECT_EQ(j.ok_cells, 1);
  EXPECT_EQ(j.metric[kUnderLoad].n, 1);
  EXPECT_EQ(j.metric[kUnderLoad].median, 140 * kMiB);
}

TEST(SweepSummaryTest, GlobalOnlyTrimFillsOnlyTheGlobalColumn) {
  std::vector<Event> ev;
  Event t = Tagged("glibc", 4, 1, "trim");
  t.mutable_trim()->mutable_trim()->set_per_thread(false);
  t.mutable_trim()->mutable_trim()->set_rss_after_bytes(static_cast<int64_t>(50 * kMiB));
  ev.push_back(t);
  Event done = Tagged("glibc", 4, 1, "trim");
  done.mutable_cell_result()->set_ok(true);
  ev.push_back(done);
  SweepSummary s = BuildSweepSummary(ev);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].metric[kTrimGlobal].median, 50 * kMiB);
  EXPECT_EQ(s.rows[0].metric[kTrimPerThread].n, 0);
}

TEST(SweepSummaryTest, MarkdownAndCsvShowEveryColumnAndTheFailure) {
  SweepSummary s = BuildSweepSummary(ThreeRepeats());
  const std::string md = SweepMarkdown(s, "results/x");
  EXPECT_THAT(md,
              HasSubstr("| glibc | - | 1 | 3/3 | yes | 125.0 (120.0-130.0) | 112.0 (110.0-115.0) |"));
  EXPECT_THAT(md, Not(HasSubstr(kCacheNeverFilled)));
  EXPECT_THAT(md, HasSubstr("trim (per-thread) MiB"));
  EXPECT_THAT(md, HasSubstr("**jemalloc/t1/r2** (exit): server killed by SIGSEGV"));
  EXPECT_THAT(md, HasSubstr("Segmentation fault"));
  const std::string csv = SweepCsv(s);
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(lines[0], ',')).size(), 10u + 3u * kNumSweepMetrics);
  EXPECT_THAT(lines[0], ::testing::EndsWith(
                            ",unfilled_cells,spread_over_20pct,base_rss_mib_median,"
                            "trim_goal_median,trim_goal_met,allocator"));
  EXPECT_THAT(lines[2], HasSubstr("glibc,1,3,3,125.0,120.0,130.0,112.0,110.0,115.0,"));
  // p99 spreads 40 % here, but only memory figures are marked; no fill
  // set_phase was recorded, so there is no base and no goal.
  EXPECT_THAT(lines[2], ::testing::EndsWith(",1100,1000,1200,2.50,2.00,3.00,0,none,-,-,-,-"));
  EXPECT_THAT(lines[1], ::testing::EndsWith(",0,n/a,-,-,-,-")) << "one repeat: nothing to judge";
  EXPECT_THAT(md, HasSubstr("| 2.50 (2.00-3.00) |"));
  EXPECT_THAT(md, HasSubstr("0 figure(s) marked"));
}

// Third pass: a failed cell's error, exit and log tail come from the cell's
// host and server; they reached summary.md raw (ESC, CR, a line that
// forges a heading). Now each is escaped where printed.
TEST(SweepSummaryTest, FailedCellTextFromThePeerIsEscaped) {
  std::vector<Event> ev = ThreeRepeats();
  for (Event& e : ev) {
    if (!e.has_cell_result() || e.cell_result().ok()) continue;
    e.mutable_cell_result()->set_error("boom\x1b[2J\n## forged");
    e.mutable_cell_result()->mutable_server()->set_exit("killed\r by SIGSEGV");
    e.mutable_cell_result()->mutable_server()->set_log_tail("a\x1b]0;t\x07\nb\n");
  }
  const std::string md = SweepMarkdown(BuildSweepSummary(ev), "results/x");
  EXPECT_EQ(md.find('\x1b'), std::string::npos) << md;
  EXPECT_EQ(md.find('\r'), std::string::npos) << md;
  EXPECT_THAT(md, HasSubstr("boom\\x1b[2J / ## forged"));
  EXPECT_THAT(md, HasSubstr("server: killed\\r by SIGSEGV"));
  EXPECT_THAT(md, HasSubstr("    a\\x1b]0;t\\x07\n    b\n"));
}

// A program that died before the stop: the cell keeps what it measured,
// marked in the cells table, the terminal table and cells.json, and stays
// out of the medians.
TEST(SweepSummaryTest, CellThatDiedBeforeStopIsMarkedWithItsMeasuredSteps) {
  std::vector<Event> ev = ThreeRepeats();
  ev.pop_back();  // the footer, added again below
  AddCell(&ev, "glibc", 1, 4, 777, 700, 700, 70, 66, 5, 5, /*ok=*/false);
  auto* cr = ev.back().mutable_cell_result();
  cr->set_failed_at("died");
  cr->set_died_before_stop(true);
  cr->set_steps_done(3);
  cr->set_steps_total(7);
  cr->set_error("died before stop after 3 of 7 steps (server killed by SIGTERM)");
  cr->mutable_server()->set_exit("killed by SIGTERM");
  Event f;
  f.mutable_footer()->set_completed(true);
  ev.push_back(f);
  SweepSummary s = BuildSweepSummary(ev);
  const std::string md = SweepMarkdown(s, "results/x");
  EXPECT_THAT(md, HasSubstr("| glibc | - | 1 | 3/4 | yes | 125.0 (120.0-130.0) |"));
  EXPECT_THAT(md, HasSubstr("| glibc/t1/r4 | **died before stop after 3 of 7 steps** |"));
  EXPECT_THAT(md, HasSubstr("| 777.0 | 700.0 |"));  // its measured figures, in its own row
  EXPECT_THAT(md, HasSubstr("**glibc/t1/r4** (died): died before stop after 3 of 7 steps"));
  EXPECT_THAT(SweepTable(s), HasSubstr("glibc/t1/r4: died before stop after 3 of 7 steps (server "
                                       "killed by SIGTERM)"));
  EXPECT_THAT(SweepJson(s), HasSubstr(R"("lost": "died before stop after 3 of 7 steps")"));
}

// A reduced sweep whose fill never reached the cache limit in one repeat:
// the row, the cell and the paragraph under the table say so.
TEST(SweepSummaryTest, CellWhoseFillNeverFilledIsFlagged) {
  std::vector<Event> ev;
  AddCell(&ev, "glibc", 4, 1, 120, 110, 110, 30, 25, 1000, 2000);
  AddCell(&ev, "glibc", 4, 2, 100, 90, 90, 30, 25, 1000, 2000, true, /*fill_stored_mib=*/72);
  SweepSummary s = BuildSweepSummary(ev);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].unfilled_cells, 1);
  ASSERT_TRUE(s.cells[1].fill.has_value());
  EXPECT_FALSE(s.cells[1].fill->filled());
  EXPECT_TRUE(s.cells[0].fill->churned_twice());
  const std::string md = SweepMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr("| glibc | - | 4 | 2/2 | **NEVER FILLED** (1/2) |"));
  EXPECT_THAT(md, HasSubstr(absl::StrCat("**", kCacheNeverFilled, "** in 1 cell(s)")));
  EXPECT_THAT(md, HasSubstr("| glibc/t4/r2 | yes | - | NEVER(0.72x) |"));
  EXPECT_THAT(SweepCsv(s), HasSubstr(",1,none,-,-,-,-\n"));
  EXPECT_THAT(SweepTable(s), HasSubstr("NEVER(1)"));
}

// A service with no cache (snapshots without cache figures): the fill check
// is off, not NEVER FILLED, and the table says "off", not "yes".
TEST(SweepSummaryTest, AServiceWithNoCacheHasTheFillCheckOff) {
  std::vector<Event> ev;
  AddCell(&ev, "glibc", 4, 1, 60, 60, 60, 30, 25, 1000, 2000);
  for (Event& e : ev) {
    if (e.has_snapshot()) e.mutable_snapshot()->clear_cache();
  }
  SweepSummary s = BuildSweepSummary(ev);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].unfilled_cells, 0);
  EXPECT_EQ(s.rows[0].fill_off_cells, 1);
  const std::string md = SweepMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr("| glibc | - | 4 | 1/1 | off |"));
  EXPECT_THAT(md, Not(HasSubstr(kCacheNeverFilled)));
  EXPECT_THAT(SweepTable(s), HasSubstr(" off "));
}

// Three repeats of two rows, after idle 90/100/115 MiB (25 % of the median)
// and 95/100/110 (15 %); the trim column exactly at the limit (20 %).
std::vector<Event> Spread() {
  std::vector<Event> ev;
  const double wide[] = {90, 100, 115};
  const double narrow[] = {95, 100, 110};
  const double trim[] = {45, 50, 55};
  for (int r = 0; r < 3; ++r) {
    AddCell(&ev, "mimalloc", 64, r + 1, 300, 280, wide[r], 270, trim[r], 1000, 2000);
    AddCell(&ev, "jemalloc", 64, r + 1, 150, 100, narrow[r], 60, trim[r], 1000, 2000);
  }
  return ev;
}

TEST(SweepSummaryTest, SpreadOverTwentyPercentIsMarked) {
  EXPECT_TRUE(SpreadTooWide(AggregateValues({90, 100, 115})));
  EXPECT_FALSE(SpreadTooWide(AggregateValues({95, 100, 110})));
  EXPECT_FALSE(SpreadTooWide(AggregateValues({90, 100, 110}))) << "20 % is not more than 20 %";
  EXPECT_FALSE(SpreadTooWide(Aggregate{1, 100, 50, 150})) << "one value is never marked";
  SweepSummary s = BuildSweepSummary(Spread());
  ASSERT_EQ(s.rows.size(), 2u);
  const SweepRow& mi = s.rows[0];
  const SweepRow& je = s.rows[1];
  ASSERT_EQ(mi.profile, "mimalloc");
  EXPECT_EQ(WideSpreadMetrics(mi), std::vector<int>{kAfterIdle});
  EXPECT_TRUE(WideSpreadMetrics(je).empty());
  const std::string md = SweepMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr(absl::StrCat("| 100.0 (90.0-115.0)", kSpreadMark, " |")));
  EXPECT_THAT(md, HasSubstr("| 100.0 (95.0-110.0) |"));
  EXPECT_THAT(md, HasSubstr("| 50.0 (45.0-55.0) |"));  // exactly 20 %
  EXPECT_THAT(md, HasSubstr("1 figure(s) marked"));
  EXPECT_THAT(md, HasSubstr("(max - min) / median > 0.20"));
  std::vector<std::string> lines = absl::StrSplit(SweepCsv(s), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_THAT(lines[1], HasSubstr(",0,after_idle_mib,-,"));
  EXPECT_THAT(lines[2], HasSubstr(",0,none,-,"));
  const std::string table = SweepTable(s);
  EXPECT_THAT(table, HasSubstr(absl::StrCat("100.0", kSpreadMark)));
  EXPECT_THAT(table, HasSubstr("not to be trusted from this run"));
  // The dagger is one column: the header and rows stay aligned.
  std::vector<std::string> t = absl::StrSplit(table, '\n');
  auto column = [](const std::string& line, const std::string& text) {
    const std::string before = line.substr(0, line.find(text));
    return std::count_if(before.begin(), before.end(),
                         [](unsigned char ch) { return (ch & 0xC0) != 0x80; });
  };
  EXPECT_EQ(column(t[0], "after_idle_mib"), column(t[1], "100.0"));
  EXPECT_EQ(column(t[0], "trim_global_mib"), column(t[1], "270.0"));
}

TEST(SweepSummaryTest, TrimGoalAgainstRssBeforeAnyLoad) {
  std::vector<Event> ev;
  // base 26 MiB: the goal's denominator is 36 MiB.
  for (int r = 1; r <= 3; ++r) {
    AddCell(&ev, "jemalloc", 64, r, 150, 100, 60, 50, 36 * 1.2, 1000, 2000, true, 350, 26);
    AddCell(&ev, "glibc", 64, r, 150, 140, 140, 56.52, 36 * 1.57, 1000, 2000, true, 350, 26);
  }
  // A set_phase(fill) after a load is no base: this cell has none.
  AddCell(&ev, "tcmalloc", 64, 1, 150, 140, 140, 60, 60, 1000, 2000);
  Event late = Tagged("tcmalloc", 64, 1, "fill");
  late.mutable_phase()->mutable_snapshot()->mutable_status()->set_rss_bytes(
      static_cast<int64_t>(140 * kMiB));
  ev.insert(ev.begin() + static_cast<int>(ev.size()) - 5, late);
  SweepSummary s = BuildSweepSummary(ev);
  ASSERT_EQ(s.rows.size(), 3u);
  const SweepRow& je = s.rows[0];
  const SweepRow& gl = s.rows[1];
  ASSERT_EQ(je.profile, "jemalloc");
  EXPECT_EQ(s.cells[0].base_rss, 26 * kMiB);
  EXPECT_NEAR(je.trim_goal.median, 1.20, 1e-6);  // RSS in whole bytes
  EXPECT_TRUE(TrimGoalMet(je.trim_goal));
  EXPECT_NEAR(gl.trim_goal.median, 1.57, 1e-6);
  EXPECT_FALSE(TrimGoalMet(gl.trim_goal));
  EXPECT_EQ(s.rows[2].base_rss.n, 0);
  EXPECT_EQ(s.rows[2].trim_goal.n, 0);
  const std::string md = SweepMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr("| trim (per-thread) MiB | trim goal | VmHWM MiB |"));
  EXPECT_THAT(md, HasSubstr("| 43.2 | 1.20x met | 160.0 |"));
  EXPECT_THAT(md, HasSubstr("| 56.5 | 1.57x missed | 160.0 |"));
  EXPECT_THAT(md, HasSubstr("| 60.0 | - | 160.0 |"));
  EXPECT_THAT(md, HasSubstr("| 26.0 | 1.20x | 1 of 1 |"));  // the cells table
  std::vector<std::string> lines = absl::StrSplit(SweepCsv(s), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[1], ::testing::EndsWith(",none,26.0,1.20,yes,-"));
  EXPECT_THAT(lines[2], ::testing::EndsWith(",none,26.0,1.57,no,-"));
  EXPECT_THAT(lines[3], ::testing::EndsWith(",n/a,-,-,-,-"));
  EXPECT_THAT(SweepTable(s), HasSubstr("1.57x missed"));
}

// "1.25x missed" would contradict itself: next to the limit, more digits.
TEST(SweepSummaryTest, GoalRatioShowsWhichSideOfTheLimit) {
  EXPECT_EQ(FormatGoalRatio(1.57), "1.57");
  EXPECT_EQ(FormatGoalRatio(1.25), "1.25");
  EXPECT_EQ(FormatGoalRatio(1.252), "1.252");
  EXPECT_EQ(FormatGoalRatio(1.2496), "1.2496");
  EXPECT_EQ(FormatGoalRatio(1.2549), "1.255");
  EXPECT_EQ(FormatGoalRatio(1.24), "1.24");
  EXPECT_EQ(FormatTrimGoal(Aggregate{1, 1.2501, 1.2501, 1.2501}), "1.2501x missed");
  EXPECT_EQ(FormatTrimGoal(Aggregate{1, 1.2499, 1.2499, 1.2499}), "1.2499x met");
  EXPECT_EQ(FormatTrimGoal(Aggregate{}), "-");
}

TEST(SweepSummaryTest, OrdinaryRunIsNotASweep) {
  Event h;
  h.mutable_header()->set_scenario_name("seed");
  EXPECT_FALSE(IsSweepRun({h}));
}

// A --resume rerun: the killed attempt's records of an unfinished cell (here
// a huge VmHWM) are superseded by the rerun's; finished cells are untouched.
TEST(SweepSummaryTest, ResumedRecordSupersedesUnfinishedCellsOnly) {
  std::vector<Event> ev;
  Event h;
  h.mutable_header()->mutable_scenario()->mutable_sweep()->add_profiles("glibc");
  ev.push_back(h);
  AddCell(&ev, "glibc", 1, 1, 120, 110, 110, 30, 25, 1000, 2000);
  Event partial = Tagged("glibc", 2, 1, "fill");
  partial.mutable_snapshot()->mutable_status()->set_hwm_bytes(static_cast<int64_t>(900 * kMiB));
  ev.push_back(partial);  // then the loadgen was killed
  std::vector<Event> without = ev;
  Event r;
  r.mutable_resumed()->add_kept_cells("glibc/t1/r1");
  ev.push_back(r);
  AddCell(&ev, "glibc", 2, 1, 130, 115, 114, 32, 27, 1200, 3000);
  AddCell(&without, "glibc", 2, 1, 130, 115, 114, 32, 27, 1200, 3000);

  SweepSummary s = BuildSweepSummary(ev);
  ASSERT_EQ(s.cells.size(), 2u);
  EXPECT_EQ(s.cells[0].value[kHwm], 130 * kMiB);  // kept, from before the resume
  EXPECT_EQ(s.cells[1].value[kHwm], 140 * kMiB);  // the rerun's own, not 900
  EXPECT_EQ(s.failed_cells, 0);
  // Without the marker the stale record would leak in: the test can fail.
  EXPECT_EQ(BuildSweepSummary(without).cells[1].value[kHwm], 900 * kMiB);
}

// The allocator version column: from what each cell's snapshots recorded
// (mimalloc's version_text, or the mi_version old 2.0.9 cells recorded
// before version_text existed; jemalloc's version; glibc's), else from the
// library path the launch recorded; a row mixing versions names both.
TEST(SweepSummaryTest, AllocatorVersionPerRowFromWhatCellsRecorded) {
  std::vector<Event> ev;
  // profile, repeat, family, library, mi_version, version text
  struct Rec {
    const char* profile;
    int repeat;
    const char* family;
    const char* library;
    int mi_version;
    const char* text;
  };
  const Rec recs[] = {
      {"mimalloc", 1, "mimalloc", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0", 209, ""},
      {"mimalloc3", 1, "mimalloc", "/p/.deps/mimalloc3/libmimalloc.so.3.0", 301, "3.0.1"},
      {"mimalloc3", 2, "mimalloc", "/p/.deps/mimalloc3/libmimalloc.so.3.0", 301, "3.0.1"},
      {"jemalloc", 1, "jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", 0, ""},
      {"glibc", 1, "glibc", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0, ""},
      {"glibc", 2, "glibc", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0, "2.36"},
      {"tcmalloc", 1, "tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4.5.10", 0, ""},
      {"nosnap", 1, "", "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2.0", 0, ""},
  };
  for (const Rec& r : recs) {
    if (*r.family != '\0') {
      Event e = Tagged(r.profile, 1, r.repeat, "fill");
      auto* sn = e.mutable_snapshot();
      sn->set_allocator(r.family);
      sn->set_allocator_library(r.library);
      auto* a = sn->mutable_allocator_stats();
      if (std::string(r.family) == "mimalloc") {
        a->mutable_mimalloc()->set_version(r.mi_version);
        a->mutable_mimalloc()->set_version_text(r.text);
      } else if (std::string(r.family) == "jemalloc") {
        a->mutable_jemalloc()->set_version("5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c");
      } else if (std::string(r.family) == "glibc") {
        a->mutable_glibc()->set_version(r.text);
      }
      ev.push_back(e);
    }
    Event done = Tagged(r.profile, 1, r.repeat, "trim");
    done.mutable_cell_result()->set_ok(true);
    done.mutable_cell_result()->mutable_server()->set_mapped_library(r.library);
    ev.push_back(done);
  }
  SweepSummary s = BuildSweepSummary(ev);
  std::map<std::string, std::string> by_profile;
  for (const SweepRow& r : s.rows) by_profile[r.profile] = r.allocator;
  EXPECT_EQ(by_profile["mimalloc"], "mimalloc 2.0.9");
  EXPECT_EQ(by_profile["mimalloc3"], "mimalloc 3.0.1");
  EXPECT_EQ(by_profile["jemalloc"], "jemalloc 5.3.0");
  EXPECT_EQ(by_profile["glibc"], "glibc / glibc 2.36");
  EXPECT_EQ(by_profile["tcmalloc"], "tcmalloc (libtcmalloc.so.4.5.10)");
  // No snapshot named the family: nothing to say which library is which.
  EXPECT_EQ(by_profile["nosnap"], "");
  const std::string csv = SweepCsv(s);
  EXPECT_THAT(csv, HasSubstr(",mimalloc 2.0.9\n"));
  EXPECT_THAT(csv, HasSubstr(",mimalloc 3.0.1\n"));
  EXPECT_THAT(csv, HasSubstr(",-\n"));
  const std::string md = SweepMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr("| mimalloc3 | mimalloc 3.0.1 | 1 | 2/2 |"));
  EXPECT_THAT(md, HasSubstr("| mimalloc/t1/r1 | yes | mimalloc 2.0.9 |"));
  const std::string table = SweepTable(s);
  EXPECT_THAT(table, HasSubstr("mimalloc3  mimalloc 3.0.1"));
}

// cells.json: the same summary as data, read back through its schema; the
// figures are raw (bytes, QPS, us), the marks and goal as the tables show.
TEST(SweepSummaryTest, CellsJsonCarriesRowsAndEveryCell) {
  SweepSummary s = BuildSweepSummary(ThreeRepeats());
  v1::SweepTable t;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(SweepJson(s), &t).ok());
  EXPECT_EQ(t.scenario(), "sweep");
  EXPECT_TRUE(t.completed());
  EXPECT_EQ(t.failed_cells(), 1);
  ASSERT_EQ(t.metrics_size(), kNumSweepMetrics);
  EXPECT_EQ(t.metrics(0).key(), "under_load_mib");
  EXPECT_EQ(t.metrics(kQps).unit(), "requests/s");
  EXPECT_TRUE(t.metrics(kHwm).memory());
  EXPECT_FALSE(t.metrics(kQps).memory());
  EXPECT_EQ(t.spread_limit(), kSpreadLimit);
  EXPECT_EQ(t.trim_goal_ratio(), kTrimGoalRatio);
  EXPECT_EQ(t.cache_never_filled(), kCacheNeverFilled);
  ASSERT_EQ(t.rows_size(), 2);
  const v1::SweepTableRow& g = t.rows(1);
  EXPECT_EQ(g.profile(), "glibc");
  EXPECT_EQ(g.ok_cells(), 3);
  const v1::SweepFigure& load = g.figures().at("under_load_mib");
  EXPECT_EQ(load.n(), 3);
  EXPECT_EQ(load.median(), 125 * kMiB);
  EXPECT_EQ(load.min(), 120 * kMiB);
  EXPECT_EQ(load.text(), "125.0");
  EXPECT_FALSE(load.wide_spread());
  EXPECT_EQ(g.figures().at("qps").median(), 1100);
  EXPECT_TRUE(g.spread_judged());
  EXPECT_EQ(g.trim_goal_text(), "-");
  ASSERT_EQ(t.cells_size(), 5);
  int failed = 0;
  for (const v1::SweepTableCell& c : t.cells()) {
    if (c.cell() != "jemalloc/t1/r2") continue;
    ++failed;
    EXPECT_EQ(c.status(), "failed");
    EXPECT_EQ(c.error(), "server killed by SIGSEGV");
    EXPECT_EQ(c.figures().at("under_load_mib"), 999 * kMiB);
    EXPECT_TRUE(c.has_fill());
  }
  EXPECT_EQ(failed, 1);
}

}  // namespace
}  // namespace rsslab
