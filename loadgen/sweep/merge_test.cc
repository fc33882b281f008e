#include "loadgen/sweep/merge.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadgen/results/cells.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/results_testing.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kMiB = 1048576;

rsslab::v1::Scenario Matrix(int threads2) {
  rsslab::v1::Scenario s;
  s.set_name("m");
  s.mutable_sweep()->add_profiles("glibc");
  s.mutable_sweep()->add_profiles("jemalloc");
  s.mutable_sweep()->add_threads(1);
  if (threads2 > 0) s.mutable_sweep()->add_threads(threads2);
  s.add_step()->set_name("fill");
  return s;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One batch task's run directory: cell `index` of the matrix, started at
// `start_s`, its fill snapshot at `rss_mib`; `ok` false: a failed result;
// `finished` false: killed after its fill step (no result, no footer).
std::string CellRun(const std::string& name, const rsslab::v1::Scenario& sc, int index,
                    int start_s, double rss_mib, bool ok, bool finished = true) {
  const std::string dir = TmpDir(name);
  auto log = EventLog::Create(dir, false);
  EXPECT_TRUE(log.ok()) << log.status();
  const SweepCell cell = ExpandCells(sc.sweep())[index];
  Event h;
  *h.mutable_header()->mutable_scenario() = sc;
  h.mutable_header()->set_matrix_id(MatrixId(sc, {}));
  h.mutable_header()->add_cells_selected(index);
  h.mutable_header()->set_start_unix_nanos(start_s * 1000000000LL);
  EXPECT_TRUE((*log)->Append(h).ok());
  Event tag;
  tag.set_cell(cell.id);
  tag.set_profile(cell.profile);
  tag.set_threads(cell.threads);
  tag.set_repeat(cell.repeat);
  tag.set_cell_index(index);
  tag.set_attempt(1);
  tag.set_unix_nanos((start_s + 1) * 1000000000LL);
  Event step = tag;
  step.mutable_step()->set_step("fill");
  EXPECT_TRUE((*log)->Append(step).ok());
  Event snap = tag;
  snap.set_loadgen_phase("fill");
  snap.mutable_snapshot()->mutable_status()->set_rss_bytes(static_cast<int64_t>(rss_mib * kMiB));
  EXPECT_TRUE((*log)->Append(snap).ok());
  if (!finished) return dir;
  Event r = tag;
  r.mutable_cell_result()->set_ok(ok);
  r.mutable_cell_result()->set_start_unix_nanos(start_s * 1000000000LL);
  r.mutable_cell_result()->set_error(ok ? "" : "server exited 3");
  EXPECT_TRUE((*log)->Append(r).ok());
  Event f;
  f.mutable_footer()->set_completed(true);
  EXPECT_TRUE((*log)->Append(f).ok());
  return dir;
}

TEST(MergeTest, CellsFromSeveralRunsMakeOneCompleteSweep) {
  const auto sc = Matrix(0);
  const std::string a = CellRun("m1/a", sc, 0, 100, 30, true);
  const std::string b = CellRun("m1/b", sc, 1, 101, 40, true);
  MergeResult r;
  ASSERT_TRUE(MergeRunDirs({a, b}, TmpDir("m1/out"), &r).ok());
  EXPECT_EQ(r.summary.ok_cells, 2);
  EXPECT_TRUE(SweepComplete(r.summary));
  EXPECT_THAT(Read(TmpDir("m1/out") + "/summary.md"), HasSubstr("Status: **completed**"));
  // Idempotent: a second merge, and one over the parent directory (which
  // now also holds the output), give the same table.
  const std::string csv = Read(TmpDir("m1/out") + "/summary.csv");
  MergeResult again;
  ASSERT_TRUE(MergeRunDirs({TmpDir("m1")}, TmpDir("m1/out"), &again).ok());
  EXPECT_EQ(Read(TmpDir("m1/out") + "/summary.csv"), csv);
  EXPECT_EQ(again.run_dirs.size(), 2u);
}

TEST(MergeTest, LatestSuccessfulAttemptCountsAndEveryAttemptIsKept) {
  const auto sc = Matrix(0);
  const std::string ok1 = CellRun("m2/ok1", sc, 0, 100, 30, true);
  const std::string bad = CellRun("m2/bad", sc, 0, 200, 99, false);
  const std::string other = CellRun("m2/other", sc, 1, 100, 40, true);
  MergeResult r;
  ASSERT_TRUE(MergeRunDirs({bad, ok1, other}, TmpDir("m2/out"), &r).ok());
  ASSERT_EQ(r.summary.cells.size(), 2u);
  EXPECT_TRUE(r.summary.cells[0].ok);
  EXPECT_EQ(r.summary.cells[0].value[kUnderLoad], 30 * kMiB);  // attempt 1, not the later failure
  EXPECT_EQ(r.summary.cells[0].attempt, 1);
  EXPECT_EQ(r.summary.cells[0].attempts, 2);
  ASSERT_EQ(r.summary.superseded.size(), 1u);
  EXPECT_EQ(r.summary.superseded[0].attempt, 2);
  EXPECT_THAT(r.summary.superseded[0].error, HasSubstr("server exited 3"));
  // A later success counts over the earlier one.
  CellRun("m2/ok3", sc, 0, 300, 20, true);
  ASSERT_TRUE(MergeRunDirs({TmpDir("m2")}, TmpDir("m2/out"), &r).ok());
  EXPECT_EQ(r.summary.cells[0].value[kUnderLoad], 20 * kMiB);
  EXPECT_EQ(r.summary.cells[0].attempt, 3);
}

// Hardening class 8 (docs/RELIABILITY.md): the same run directory given twice, or a copy of it,
// showed up as extra re-queued attempts. Identical records are one attempt.
TEST(MergeTest, TheSameRunGivenTwiceOrCopiedIsCountedOnce) {
  const auto sc = Matrix(0);
  const std::string a = CellRun("m9/a", sc, 0, 100, 30, true);
  const std::string b = CellRun("m9/b", sc, 1, 101, 40, true);
  // A byte-for-byte copy of a, elsewhere.
  const std::string copy = TmpDir("m9/copy");
  ASSERT_EQ(mkdir(copy.c_str(), 0755), 0);
  {
    std::ofstream out(copy + "/events.jsonl");
    out << Read(a + "/events.jsonl");
  }
  MergeResult r;
  absl::Status st = MergeRunDirs({a, b, a, copy}, TmpDir("m9/out"), &r);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(r.attempts, 2);
  ASSERT_EQ(r.summary.cells.size(), 2u);
  EXPECT_EQ(r.summary.cells[0].attempts, 1);
  EXPECT_TRUE(r.summary.superseded.empty());
  EXPECT_TRUE(SweepComplete(r.summary));
  EXPECT_THAT(absl::StrJoin(r.notes, "\n"), HasSubstr("same records as"));
}

TEST(MergeTest, MissingAndUnfinishedCellsMakeItIncomplete) {
  const auto sc = Matrix(2);  // 4 cells
  const std::string a = CellRun("m3/a", sc, 1, 100, 30, true);
  const std::string killed = CellRun("m3/k", sc, 2, 100, 30, false, /*finished=*/false);
  MergeResult r;
  ASSERT_TRUE(MergeRunDirs({a, killed}, TmpDir("m3/out"), &r).ok());
  EXPECT_FALSE(SweepComplete(r.summary));
  EXPECT_EQ(IncompleteLine(r.summary), "INCOMPLETE (1 of 4 cells)");
  EXPECT_THAT(r.summary.missing, ElementsAre(0, 3));
  EXPECT_EQ(r.unfinished_attempts, 1);
  const std::string md = Read(TmpDir("m3/out") + "/summary.md");
  EXPECT_THAT(md, HasSubstr("**INCOMPLETE (1 of 4 cells)**: no record of cell(s) 0,3"));
  EXPECT_THAT(md, HasSubstr("its records stop after step 'fill'"));
  // The killed attempt's own records are all there.
  int killed_records = 0;
  absl::StatusOr<std::vector<Event>> merged = ReadEvents(TmpDir("m3/out"), nullptr);
  ASSERT_TRUE(merged.ok());
  for (const Event& e : *merged) {
    if (e.cell_index() == 2 && e.has_snapshot()) ++killed_records;
  }
  EXPECT_EQ(killed_records, 1);
}

TEST(MergeTest, AnotherMatrixOrAForeignOutIsRefused) {
  const std::string a = CellRun("m4/a", Matrix(0), 0, 100, 30, true);
  const std::string b = CellRun("m4/b", Matrix(4), 0, 100, 30, true);
  MergeResult r;
  absl::Status s = MergeRunDirs({a, b}, TmpDir("m4/out"), &r);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("ran another matrix"));
  EXPECT_THAT(s.message(), HasSubstr("the thread counts differ: [1] vs [1,4]"));
  MergeResult r2;
  s = MergeRunDirs({a}, b, &r2);  // b is a run, not a merge
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("holds a run, not a merge"));
}

// Profiles measured later join a sweep whose matrix is the same but for its
// profiles: only with union_profiles, which makes one matrix of all of them
// (the first input's profiles, then the new ones) with every cell in it.
TEST(MergeTest, UnionProfilesAddsTheProfilesOfALaterRun) {
  const auto old_matrix = Matrix(0);  // glibc, jemalloc x 1 thread
  rsslab::v1::Scenario later = Matrix(0);
  later.mutable_sweep()->clear_profiles();
  later.mutable_sweep()->add_profiles("mimalloc3");
  later.mutable_sweep()->add_profiles("glibc");  // in both: not added twice
  const std::string a = CellRun("m5/a", old_matrix, 0, 100, 30, true);
  const std::string b = CellRun("m5/b", old_matrix, 1, 101, 40, true);
  const std::string c = CellRun("m5/c", later, 0, 200, 50, true);  // mimalloc3/t1/r1
  MergeResult refused;
  absl::Status s = MergeRunDirs({a, b, c}, TmpDir("m5/out"), &refused);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("only the profiles differ: --union_profiles"));
  // Threads differ too: refused even with union_profiles.
  const std::string d = CellRun("m5/d", Matrix(4), 0, 100, 30, true);
  MergeOptions o;
  o.union_profiles = true;
  MergeResult r2;
  s = MergeRunDirs({a, d}, TmpDir("m5/out2"), o, &r2);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), Not(HasSubstr("only the profiles differ")));

  MergeResult r;
  ASSERT_TRUE(MergeRunDirs({a, b, c}, TmpDir("m5/out"), o, &r).ok());
  EXPECT_EQ(r.summary.cells_total, 3);
  EXPECT_EQ(r.summary.ok_cells, 3);
  EXPECT_TRUE(SweepComplete(r.summary));
  std::vector<std::string> rows;
  for (const SweepRow& row : r.summary.rows) rows.push_back(row.profile);
  EXPECT_THAT(rows, ElementsAre("glibc", "jemalloc", "mimalloc3"));
  int skipped = 0;
  auto merged = ReadEvents(TmpDir("m5/out"), &skipped);
  ASSERT_TRUE(merged.ok());
  const auto& h = merged->front().header();
  EXPECT_THAT(h.scenario().sweep().profiles(), ElementsAre("glibc", "jemalloc", "mimalloc3"));
  EXPECT_EQ(h.matrix_id(), MatrixId(h.scenario(), h.flags()));
  EXPECT_EQ(h.cells_total(), 3);
}

}  // namespace
}  // namespace rsslab
