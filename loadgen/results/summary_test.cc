#include "loadgen/results/summary.h"

#include <unistd.h>

#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/results_testing.h"
#include "loadgen/results/summary_render.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(SummaryTest, SummaryFillsEverySeedColumn) {
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
  EXPECT_EQ(row[16], "yes(3.50x)");
  EXPECT_THAT(md, HasSubstr("Fill check: cache filled (fill stored 350.0 MiB"));
  EXPECT_THAT(md, ::testing::Not(HasSubstr(kCacheNeverFilled)));
  const std::string csv = SummaryCsv(s, "d");
  EXPECT_THAT(csv, HasSubstr("run_dir,scenario,completed,workers"));
}

// A run scaled down so far that the cache never reached its limit says so
// at the top of summary.md and in the table.
TEST(SummaryTest, FillThatNeverReachedTheLimitIsFlagged) {
  SummaryBuilder b;
  for (rsslab::v1::Event e : SeedLikeRun(true)) {
    if (e.loadgen_phase() == "fill" && e.has_snapshot()) {
      e.mutable_snapshot()->mutable_cache()->set_cache_bytes(int64_t{72} << 20);
      e.mutable_snapshot()->mutable_cache()->set_evicted_bytes(0);
      e.mutable_snapshot()->mutable_cache()->set_evictions(0);
    }
    b.Add(e);
  }
  ASSERT_TRUE(b.summary().fill.has_value());
  EXPECT_FALSE(b.summary().fill->filled());
  EXPECT_EQ(SummaryRow(b.summary())[16], "NEVER(0.72x)");
  EXPECT_THAT(SummaryMarkdown(b.summary(), "d"),
              HasSubstr(std::string("**Fill check: ") + kCacheNeverFilled));
}

TEST(SummaryTest, IncompleteRunSaysSoAndShowsWhatWasMeasured) {
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

// A resumed run's last footer covers only its own part; a step
// that failed earlier keeps the run from "completed". An interrupted step
// (the reason to resume) does not.
TEST(SummaryTest, FinalStatusComesFromEveryStepNotTheLastFooter) {
  auto step = [](bool ok, const std::string& error) {
    rsslab::v1::Event e;
    e.mutable_step()->set_step("load");
    e.mutable_step()->set_ok(ok);
    e.mutable_step()->set_error(error);
    return e;
  };
  auto footer = [](bool completed) {
    rsslab::v1::Event e;
    e.mutable_footer()->set_completed(completed);
    return e;
  };
  SummaryBuilder failed;
  for (const auto& e : {step(false, "UNAVAILABLE: SetPhase failed"), footer(false), step(true, ""),
                        footer(true)}) {
    failed.Add(e);
  }
  EXPECT_FALSE(failed.summary().completed);
  EXPECT_THAT(SummaryMarkdown(failed.summary(), "d"), HasSubstr("INCOMPLETE"));

  SummaryBuilder interrupted;
  for (const auto& e : {step(false, "interrupted"), footer(false), step(true, ""), footer(true)}) {
    interrupted.Add(e);
  }
  EXPECT_TRUE(interrupted.summary().completed);
}

// Third pass: a peer's text (a server's error, a handler's name and knobs,
// an allocator string in a snapshot) reached summary.md and the terminal
// table raw, so it could forge lines or drive the terminal; a byte that is
// not UTF-8 made the events line log protobuf errors. Now each is escaped
// where printed and the JSON carries valid UTF-8.
TEST(SummaryTest, PeerTextIsEscapedWherePrintedAndJsonIsUtf8) {
  SummaryBuilder b;
  for (auto e : SeedLikeRun(true)) {
    if (e.has_snapshot()) {
      e.mutable_snapshot()->set_allocator("glibc\x1b[2J");
      auto* cfg = e.mutable_snapshot()->mutable_config();
      cfg->set_handler("/x/evil\r\n| forged | row |.py");
      (*cfg->mutable_handler_params())["k\x1b"] = "v\n";
    }
    b.Add(e);
  }
  rsslab::v1::Event step;
  step.mutable_step()->set_step("load\x1b]0;title\x07");
  step.mutable_step()->set_ok(false);
  step.mutable_step()->set_error("UNAVAILABLE: boom\n## forged heading\xff");
  b.Add(step);
  const std::string md = SummaryMarkdown(b.summary(), "d");
  const std::string table = SummaryTable({b.summary()}, {"x"});
  for (const std::string& out : {md, table}) {
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;
    EXPECT_EQ(out.find('\r'), std::string::npos) << out;
    EXPECT_EQ(out.find("\n## forged"), std::string::npos) << out;
  }
  EXPECT_THAT(md, HasSubstr("boom\\n## forged heading\\xff"));
  EXPECT_THAT(md, HasSubstr("evil\\r\\n| forged"));
  EXPECT_THAT(table, HasSubstr("glibc\\x1b[2J"));
  const std::string json = EventToJson(step);
  EXPECT_THAT(json, HasSubstr("heading\\\\xff"));  // the escape, JSON-quoted
  EXPECT_EQ(json.find('\xff'), std::string::npos) << json;
}

TEST(SummaryTest, WriteSummaryWritesBothFiles) {
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
TEST(SummaryTest, HandlerKnobsShownAndDifferencesFlagged) {
  auto run = [](const std::string& shape) {
    SummaryBuilder b;
    for (auto e : SeedLikeRun(true)) {
      if (e.has_snapshot()) {
        auto* cfg = e.mutable_snapshot()->mutable_config();
        cfg->set_handler("/x/server/handlers/web_worker.py");
        if (!shape.empty()) {
          (*cfg->mutable_handler_params())["dict_shape"] = shape;
          (*cfg->mutable_handler_params())["dict_items"] = "200";
        }
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

// A streaming step's messages (what events.jsonl has) in summary.md, by step
// and by method, and in summary.csv as the run's totals; a run of unary
// calls has 0 there and no per-method table.
TEST(SummaryTest, StreamingMessagesByStepAndMethodInBothFiles) {
  auto stream_step = [](const std::string& step, const std::string& call, uint64_t streams,
                        uint64_t sent, uint64_t received) {
    rsslab::v1::Event e;
    e.set_loadgen_phase("shrink");
    auto* l = e.mutable_load();
    l->set_step(step);
    l->set_call(call);
    l->set_streaming(true);
    l->set_requests_ok(streams - 1);
    l->set_requests_failed(1);
    l->set_elapsed_s(1);
    l->set_messages_sent(sent);
    l->set_messages_received(received);
    return e;
  };
  std::vector<rsslab::v1::Event> ev = SeedLikeRun(true);
  const rsslab::v1::Event footer = ev.back();
  ev.pop_back();
  ev.push_back(stream_step("chat-1", "shop.v1.Cart/Chat", 10, 200, 190));
  ev.push_back(stream_step("chat-2", "shop.v1.Cart/Chat", 5, 100, 100));
  ev.push_back(stream_step("track", "shop.v1.Cart/Track", 4, 4, 36));
  ev.push_back(footer);
  SummaryBuilder b;
  for (const auto& e : ev) b.Add(e);
  const std::string md = SummaryMarkdown(b.summary(), "d");
  EXPECT_THAT(md, HasSubstr("| statuses | messages sent | messages received |"));
  EXPECT_THAT(md, HasSubstr("| OK=1000 | - | - |"));  // the unary fill step
  EXPECT_THAT(md, HasSubstr("|  | 200 | 190 |"));      // chat-1's row
  EXPECT_THAT(md, HasSubstr("## Streaming messages by method"));
  EXPECT_THAT(md, HasSubstr("| shop.v1.Cart/Chat | 15 | 300 | 290 |"));
  EXPECT_THAT(md, HasSubstr("| shop.v1.Cart/Track | 4 | 4 | 36 |"));
  std::vector<std::string> csv = absl::StrSplit(SummaryCsv(b.summary(), "d"), '\n');
  ASSERT_GE(csv.size(), 2u);
  EXPECT_THAT(csv[0], ::testing::EndsWith(",fill,messages_sent,messages_received"));
  EXPECT_THAT(csv[1], ::testing::EndsWith(",304,326"));

  SummaryBuilder unary;
  for (const auto& e : SeedLikeRun(true)) unary.Add(e);
  csv = absl::StrSplit(SummaryCsv(unary.summary(), "d"), '\n');
  EXPECT_THAT(csv[1], ::testing::EndsWith(",0,0"));
  EXPECT_THAT(SummaryMarkdown(unary.summary(), "d"),
              Not(HasSubstr("Streaming messages by method")));
}

TEST(SummaryTest, AServiceIsItsMasterAndWorkersWithATablePerProcess) {
  SummaryBuilder b;
  auto worker = [](int pid, int64_t rss) {
    rsslab::v1::Event e;
    e.set_worker_pid(pid);
    e.set_loadgen_phase("idle");
    e.mutable_snapshot()->mutable_status()->set_rss_bytes(rss);
    return e;
  };
  b.Add(worker(11, 40 << 20));
  b.Add(worker(12, 60 << 20));  // not the first worker: its figures are in the service's
  rsslab::v1::Event svc;
  svc.set_loadgen_phase("idle");
  auto* m = svc.mutable_snapshot()->mutable_service();
  for (auto [pid, rss, pss] : {std::tuple<int, int, int>{10, 20, 8}, {11, 40, 30}, {12, 60, 50}}) {
    auto* p = m->add_processes();
    p->set_pid(pid);
    p->set_role(pid == 10 ? "master" : "worker");
    p->set_rss_bytes(int64_t{rss} << 20);
    p->set_pss_bytes(int64_t{pss} << 20);
    p->set_threads(2);
  }
  m->set_master_pid(10);
  m->set_rss_bytes(120 << 20);
  m->set_pss_bytes(88 << 20);
  svc.mutable_snapshot()->mutable_status()->set_rss_bytes(120 << 20);
  b.Add(svc);
  const RunSummary& s = b.summary();
  EXPECT_EQ(SummaryRow(s)[6], "120.0");  // rss after idle: the service's total
  EXPECT_EQ(ServiceCsv(s),
            "phase,pid,role,rss_mib,pss_mib,anon_mib,hwm_mib,threads\n"
            "idle,10,master,20.0,8.0,0.0,0.0,2\n"
            "idle,11,worker,40.0,30.0,0.0,0.0,2\n"
            "idle,12,worker,60.0,50.0,0.0,0.0,2\n"
            "idle,0,total,120.0,88.0,0.0,0.0,6\n");
  const std::string md = SummaryMarkdown(s, "d");
  EXPECT_THAT(md, HasSubstr("| idle | 3 | 120.0 | 88.0 | 0.0 | 20.0 | 40.0 | 60.0 |"));
  EXPECT_THAT(md, HasSubstr("### master pid 10"));
  EXPECT_THAT(md, HasSubstr("### worker pid 12\n\n| phase | rss MiB"));
  EXPECT_EQ(ServiceCsv(RunSummary()), "");  // one process: no service.csv
}

}  // namespace
}  // namespace rsslab
