#include "loadgen/results.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::testing::HasSubstr;
using ::testing::Not;

std::string TmpDir(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

Event Snap(const std::string& phase, int64_t rss_mib, int arenas) {
  Event e;
  e.set_loadgen_phase(phase);
  auto* s = e.mutable_snapshot();
  s->mutable_status()->set_rss_bytes(rss_mib << 20);
  s->mutable_status()->set_hwm_bytes((rss_mib + 50) << 20);
  s->mutable_status()->set_threads(20);
  s->mutable_memory_map()->set_arena_count(arenas);
  s->mutable_config()->set_threads(4);
  s->set_allocator("glibc");
  return e;
}

std::vector<Event> SeedLikeRun(bool complete) {
  std::vector<Event> ev;
  Event h;
  h.mutable_header()->set_scenario_name("seed");
  h.mutable_header()->set_target("127.0.0.1:1");
  ev.push_back(h);
  Histogram hist;
  for (int i = 1; i <= 1000; ++i) hist.Record(i * 1000);
  Event l;
  l.set_loadgen_phase("fill");
  auto* ls = l.mutable_load();
  ls->set_step("fill");
  ls->set_requests_ok(1000);
  ls->set_elapsed_s(2);
  ls->set_qps(500);
  *ls->mutable_latency() = hist.LatencyMicros();
  *ls->mutable_histogram() = hist.ToProto();
  (*ls->mutable_status_counts())["OK"] = 1000;
  ev.push_back(l);
  ev.push_back(Snap("fill", 130, 3));
  ev.push_back(Snap("shrink", 120, 4));
  if (complete) {
    ev.push_back(Snap("idle", 119, 4));
    Event t;
    t.set_loadgen_phase("trim");
    t.mutable_phase()->mutable_snapshot()->mutable_status()->set_rss_bytes(int64_t{30} << 20);
    t.mutable_phase()->mutable_before()->mutable_status()->set_rss_bytes(int64_t{119} << 20);
    ev.push_back(t);
  }
  Event f;
  f.mutable_footer()->set_completed(complete);
  if (!complete) f.mutable_footer()->set_error("UNAVAILABLE: server went away");
  ev.push_back(f);
  return ev;
}

TEST(ResultsTest, EventLogWritesOneFlushedJsonLinePerRecord) {
  const std::string dir = TmpDir("run_a/nested");
  auto log = EventLog::Create(dir, false);
  ASSERT_TRUE(log.ok()) << log.status();
  auto events = SeedLikeRun(true);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*log)->Append(events[i]).ok());
    // Flushed at once: readable before the log is closed.
    int skipped = 0;
    auto back = ReadEvents(dir, &skipped);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->size(), i + 1);
  }
  std::ifstream in(dir + "/events.jsonl");
  std::string line;
  std::getline(in, line);
  EXPECT_THAT(line, HasSubstr("\"scenario_name\":\"seed\""));  // proto names
  EXPECT_THAT(line, HasSubstr("\"seq\""));
  EXPECT_THAT(line, Not(HasSubstr("\n")));
  // A second run never appends to the first one's records.
  EXPECT_FALSE(EventLog::Create(dir, false).ok());
}

// A disk that fills up (here: RLIMIT_FSIZE in a child) fails the append
// with a clear error and leaves only whole records behind.
TEST(ResultsTest, FullDiskFailsCleanlyAndKeepsEveryLineValid) {
  const std::string dir = TmpDir("run_full");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);  // get EFBIG instead of being killed
    rlimit lim{6000, 6000};
    setrlimit(RLIMIT_FSIZE, &lim);
    auto log = EventLog::Create(dir, false);
    if (!log.ok()) _exit(3);
    for (int i = 0; i < 1000; ++i) {
      for (Event e : SeedLikeRun(true)) {
        absl::Status s = (*log)->Append(e);
        if (!s.ok()) {
          bool named = std::string(s.message()).find("File too large") != std::string::npos &&
                       std::string(s.message()).find("events.jsonl") != std::string::npos;
          // A later append must not resurrect the torn record either.
          (void)(*log)->Append(e);
          _exit(named ? 0 : 4);
        }
      }
    }
    _exit(5);  // never hit the limit
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(dir + "/events.jsonl");
  std::string line;
  int lines = 0;
  uint64_t last_seq = 0;
  while (std::getline(in, line)) {
    Event e;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &e).ok()) << line;
    EXPECT_EQ(e.seq(), last_seq + 1);
    last_seq = e.seq();
    ++lines;
  }
  EXPECT_GT(lines, 0);
  int skipped = -1;
  auto events = ReadEvents(dir, &skipped);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(skipped, 0);
}

TEST(ResultsTest, TornLastLineIsSkipped) {
  const std::string dir = TmpDir("run_torn");
  {
    auto log = EventLog::Create(dir, false);
    ASSERT_TRUE(log.ok());
    for (const auto& e : SeedLikeRun(false)) ASSERT_TRUE((*log)->Append(e).ok());
  }
  std::ofstream(dir + "/events.jsonl", std::ios::app) << "{\"seq\":\"9\",\"snaps";
  int skipped = 0;
  auto back = ReadEvents(dir, &skipped);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(back->size(), SeedLikeRun(false).size());
}

TEST(ResultsTest, SummaryFillsEverySeedColumn) {
  SummaryBuilder b;
  for (const auto& e : SeedLikeRun(true)) b.Add(e);
  const RunSummary& s = b.summary();
  const auto row = SummaryRow(s);
  ASSERT_EQ(row.size(), SummaryColumns().size());
  for (size_t i = 0; i < row.size(); ++i) {
    EXPECT_NE(row[i], "-") << SummaryColumns()[i];
  }
  EXPECT_EQ(row[1], "yes");
  EXPECT_EQ(row[4], "130.0");  // after fill
  EXPECT_EQ(row[5], "120.0");  // after shrink
  EXPECT_EQ(row[6], "119.0");  // after idle
  EXPECT_EQ(row[7], "30.0");   // after trim (not the "before" snapshot)
  EXPECT_EQ(row[8], "180.0");  // largest VmHWM
  EXPECT_EQ(row[10], "4");     // largest arena count
  EXPECT_EQ(row[11], "500");   // qps
  EXPECT_EQ(row[12], "0.50");  // p50 ms
  EXPECT_EQ(row[13], "0.99");  // p99 ms
  const std::string md = SummaryMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr("**completed**"));
  EXPECT_THAT(md, HasSubstr("| fill | 130.0 |"));
  const std::string csv = SummaryCsv(s, "d");
  EXPECT_THAT(csv, HasSubstr("run_dir,scenario,completed,workers"));
}

TEST(ResultsTest, IncompleteRunSaysSoAndShowsWhatWasMeasured) {
  SummaryBuilder b;
  for (const auto& e : SeedLikeRun(false)) b.Add(e);
  const std::string md = SummaryMarkdown(b.summary(), "d");
  EXPECT_THAT(md, HasSubstr("INCOMPLETE"));
  EXPECT_THAT(md, HasSubstr("server went away"));
  const auto row = SummaryRow(b.summary());
  EXPECT_EQ(row[1], "no");
  EXPECT_EQ(row[4], "130.0");
  EXPECT_EQ(row[7], "-");
  // No footer at all (the loadgen was killed): still incomplete.
  SummaryBuilder nf;
  auto ev = SeedLikeRun(true);
  ev.pop_back();
  for (const auto& e : ev) nf.Add(e);
  EXPECT_THAT(SummaryMarkdown(nf.summary(), "d"), HasSubstr("no footer record"));
}

TEST(ResultsTest, WriteSummaryWritesBothFiles) {
  const std::string dir = TmpDir("run_sum");
  auto log = EventLog::Create(dir, true);
  ASSERT_TRUE(log.ok());
  SummaryBuilder b;
  for (const auto& e : SeedLikeRun(true)) b.Add(e);
  ASSERT_TRUE(WriteSummary(dir, b.summary()).ok());
  EXPECT_EQ(access((dir + "/summary.md").c_str(), R_OK), 0);
  EXPECT_EQ(access((dir + "/summary.csv").c_str(), R_OK), 0);
  EXPECT_THAT(SummaryTable({b.summary()}, {"x"}), HasSubstr("rss_trim_mib"));
}

// Snapshots record the handler and its knobs; summaries show them, and a
// table of runs that differ in them says so (web_worker's flat and nested
// dict shapes cost different CPU per request and must not be mixed up).
TEST(ResultsTest, HandlerKnobsShownAndDifferencesFlagged) {
  auto run = [](const std::string& shape) {
    SummaryBuilder b;
    for (auto e : SeedLikeRun(true)) {
      if (e.has_snapshot()) {
        auto* cfg = e.mutable_snapshot()->mutable_config();
        cfg->set_handler("/x/server/handlers/web_worker.py");
        if (!shape.empty()) (*cfg->mutable_handler_params())["dict_shape"] = shape;
        (*cfg->mutable_handler_params())["dict_items"] = "200";
        if (shape.empty()) cfg->clear_handler_params();
      }
      b.Add(e);
    }
    return b.summary();
  };
  RunSummary flat = run("flat"), flat2 = run("flat"), nested = run("nested"), old = run("");
  EXPECT_EQ(HandlerLabel(flat), "web_worker.py dict_items=200 dict_shape=flat");
  EXPECT_EQ(HandlerLabel(old), "web_worker.py (knobs not recorded)");
  EXPECT_THAT(SummaryMarkdown(nested, "d"),
              HasSubstr("Handler: `web_worker.py dict_items=200 dict_shape=nested`"));
  EXPECT_THAT(SummaryTable({flat, flat2}, {"a", "b"}), Not(HasSubstr("WARNING")));
  const std::string mixed = SummaryTable({flat, nested}, {"a", "b"});
  EXPECT_THAT(mixed, HasSubstr("WARNING: these runs used different handlers"));
  EXPECT_THAT(mixed, HasSubstr("b: web_worker.py dict_items=200 dict_shape=nested"));
  EXPECT_THAT(SummaryTable({flat, old}, {"a", "b"}), HasSubstr("WARNING"));
}

}  // namespace
}  // namespace rsslab

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
}

}  // namespace
}  // namespace rsslab
