// `rsslab_loadgen compare` on real runs: every run is a fresh rsslab_server
// on loopback driven by the real loadgen through a small seed-shaped
// scenario (a 2 MiB cache that fills and evicts, shrink, idle, trim). Four
// runs at 1 worker against four at 12 workers differ (11 more threads in
// every run, at 4 vs 4 repeats p = 0.029) and trip a threshold;
// three more runs of the first setup do not (every figure "~"); a run at
// another scale is refused, or compared with --force and marked.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::ServerProcess;
using ::rsslab::testing::Tmp;
using ::testing::HasSubstr;
using ::testing::Not;

std::string ScenarioFile() {
  const std::string path = Tmp("compare.txtpb");
  std::ofstream(path) << R"pb(
name: "cmp"
load_defaults { concurrency: 8 channels: 1 }
step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 2 } }
step { name: "fill" load { requests: 1200 } }
step { name: "after_fill" snapshot { gc: true } }
step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: 1 } }
step { name: "shrink" load { requests: 300 } }
step { name: "after_shrink" snapshot { gc: true } }
step { name: "idle" set_phase { phase: "idle" } }
step { name: "idle" wait { seconds: 0.1 } }
step { name: "after_idle" snapshot { gc: true } }
step { name: "trim" set_phase { phase: "trim" gc: true } }
)pb";
  return path;
}

// `count` runs, each against a fresh server with `workers` workers, into
// DIR/run<i>.
void Runs(const std::string& dir, int workers, int count, const std::string& scale = "1",
          const std::map<std::string, std::string>& env = {}) {
  const std::string scenario = ScenarioFile();
  for (int i = 0; i < count; ++i) {
    ServerProcess::Options o;
    o.binary = ServerProcess::Runfile("server/rsslab_server");
    o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
              absl::StrCat("--threads=", workers),
              "--handler=" + ServerProcess::Runfile("server/handlers/web_worker.py")};
    o.env = env;
    auto server = ServerProcess::Start(o);
    ASSERT_TRUE(server.ok()) << server.status();
    ServerProcess::Result r = ServerProcess::Run(
        Loadgen(), {"--scenario=" + scenario, "--target=" + (*server)->data_address(),
                    "--control=" + (*server)->control_address(), "--progress=none",
                    "--scale=" + scale, absl::StrCat("--out=", dir, "/run", i)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ((*server)->Stop(), 0);
  }
}

ServerProcess::Result Compare(std::vector<std::string> args) {
  args.insert(args.begin(), "compare");
  args.push_back("--report_tool=" + ServerProcess::Runfile("loadgen/results/plots_and_advice.py"));
  return ServerProcess::Run(Loadgen(), args);
}

class CompareE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Runs(Tmp("one"), 1, 4);
    Runs(Tmp("twelve"), 12, 4);
    Runs(Tmp("one-again"), 1, 3);
    Runs(Tmp("half"), 1, 1, "0.5");
    Runs(Tmp("arena2"), 1, 1, "1", {{"MALLOC_ARENA_MAX", "2"}});
  }
};

// The rows of the text output, by figure title.
std::string Row(const std::string& out, const std::string& title) {
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    if (absl::StrContains(line, title)) return std::string(line);
  }
  return "";
}

// Without --plot the plot goes beside the table's file; with stdout a pipe
// there is none, one line says so, and nothing lands in the current
// directory.
TEST_F(CompareE2eTest, WithoutPlotThePlotGoesBesideTheTable) {
  ASSERT_EQ(mkdir(Tmp("table").c_str(), 0755), 0);
  ServerProcess::Result r = ServerProcess::Run(
      "/bin/sh", {"-c", absl::StrCat(Loadgen(), " compare ", Tmp("one"), " ", Tmp("one-again"),
                                     " > ", Tmp("table/same.txt"))});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st;
  EXPECT_EQ(stat(Tmp("table/same.png").c_str(), &st), 0) << r.err;
  r = ServerProcess::Run("/bin/sh", {"-c", absl::StrCat(Loadgen(), " compare ", Tmp("one"), " ",
                                                        Tmp("one-again"), " | cat")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("no plot: stdout is not a file to put it beside"));
  EXPECT_NE(stat("compare.png", &st), 0);
}

TEST_F(CompareE2eTest, MoreWorkersDifferAndTripAThreshold) {
  const std::string png = Tmp("compare.png");
  ServerProcess::Result r = Compare({Tmp("one"), Tmp("twelve"), "--fail_if=threads>+10%",
                                     "--fail_if=rss_after_idle>+1000%", "--plot=" + png});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("cmp, 1 workers (glibc) -> cmp, 12 workers (glibc)  (4 vs 4 repeats)"));
  // Eleven more worker threads in every run: the U test's smallest p at 4 vs 4.
  const std::string threads = Row(r.out, "OS threads (max)");
  EXPECT_THAT(threads, HasSubstr("0.029  worse")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("FAIL threads>+10%: cmp, 1 workers (glibc) -> cmp, 12 workers "
                               "(glibc) threads changed +"));
  EXPECT_THAT(r.out, Not(HasSubstr("FAIL rss_after_idle")));
  // The fill phase filled the cache in every run, so the pair is comparable.
  EXPECT_THAT(r.out, Not(HasSubstr("NOT COMPARABLE")));
  struct stat st;
  EXPECT_EQ(stat(png.c_str(), &st), 0) << r.err;
  EXPECT_GT(st.st_size, 10000);

  ServerProcess::Result j = Compare({Tmp("one"), Tmp("twelve"), "--json", "--plot="});
  EXPECT_EQ(j.exit_code, 0) << j.err;
  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(j.out, &json).ok()) << j.out;
  const auto& figures =
      json.fields().at("pairs").list_value().values(0).struct_value().fields().at("figures");
  // Each figure is what the runs' own summaries say: p50 in ms here is the
  // median of the four summary.csv p50_ms values.
  std::vector<double> p50;
  for (int i = 0; i < 4; ++i) {
    std::vector<std::string> lines =
        absl::StrSplit(ReadFile(absl::StrCat(Tmp("one"), "/run", i, "/summary.csv")), '\n');
    ASSERT_GE(lines.size(), 2u);
    std::vector<std::string> head = absl::StrSplit(lines[0], ',');
    std::vector<std::string> row = absl::StrSplit(lines[1], ',');
    const size_t col = std::find(head.begin(), head.end(), "p50_ms") - head.begin();
    ASSERT_LT(col, row.size());
    p50.push_back(std::stod(row[col]));
  }
  std::sort(p50.begin(), p50.end());
  bool seen = false;
  for (const auto& f : figures.list_value().values()) {
    const auto& m = f.struct_value().fields();
    if (m.at("figure").string_value() == "p50_ms") {
      EXPECT_NEAR(m.at("base_median").number_value(), (p50[1] + p50[2]) / 2, 0.01);
    }
    if (m.at("figure").string_value() != "threads") continue;
    seen = true;
    EXPECT_TRUE(m.at("significant").bool_value());
    EXPECT_EQ(m.at("base_values").list_value().values_size(), 4);
    // 11 more workers; gRPC's own pools vary by a few threads under load.
    EXPECT_GE(m.at("new_median").number_value() - m.at("base_median").number_value(), 6);
  }
  EXPECT_TRUE(seen) << j.out;
}

TEST_F(CompareE2eTest, TheSameSetupShowsNoChange) {
  ServerProcess::Result r = Compare({Tmp("one"), Tmp("one-again"), "--fail_if=threads>+10%",
                                     "--format=md", "--plot="});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("## cmp, 1 workers (glibc) (4 vs 3 repeats)"));
  int rows = 0;
  for (absl::string_view line : absl::StrSplit(r.out, '\n')) {
    if (!absl::StartsWith(line, "| ") || absl::StartsWith(line, "| figure")) continue;
    ++rows;
    EXPECT_TRUE(absl::EndsWith(line, "| ~ |")) << line;
  }
  EXPECT_EQ(rows, 11) << r.out;
  // 4 vs 3 cannot reach p < 0.05, and compare says so.
  EXPECT_THAT(r.out, HasSubstr("the smallest p the test can give is 0.057"));
  EXPECT_THAT(r.err, HasSubstr("--fail_if=threads>+10% can never fire here"));
}

TEST_F(CompareE2eTest, AnotherScaleIsRefusedUnlessForced) {
  ServerProcess::Result r = Compare({Tmp("one"), Tmp("half"), "--plot="});
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("are not comparable: different scale: 1 in"));
  EXPECT_EQ(r.out, "");
  r = Compare({Tmp("one"), Tmp("half"), "--force", "--plot="});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("FORCED, not comparable: different scale"));
}

// The server's start environment is part of every run's fingerprint: a run
// under MALLOC_ARENA_MAX=2 is refused against the plain runs, in one line
// naming the variable, unless that field is ignored on purpose.
TEST_F(CompareE2eTest, AnotherStartEnvironmentIsRefusedByFingerprint) {
  ServerProcess::Result r = Compare({Tmp("one"), Tmp("arena2"), "--plot=", "--force"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.err,
            "rsslab_loadgen: compare: base and new differ in MALLOC_ARENA_MAX at start (unset vs "
            "2); not comparable (--ignore_fingerprint=MALLOC_ARENA_MAX compares anyway)\n");
  EXPECT_EQ(r.out, "");
  r = Compare({Tmp("one"), Tmp("arena2"), "--plot=", "--ignore_fingerprint=MALLOC_ARENA_MAX"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("differs: allocator environment: { (none) } -> { "
                               "MALLOC_ARENA_MAX=2 }"));
  // The same setup: the fingerprint the server recorded about itself.
  r = Compare({Tmp("one"), Tmp("one-again"), "--plot="});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  fingerprint: glibc 2."));
  EXPECT_THAT(r.out, Not(HasSubstr("not recorded")));
  r = Compare({Tmp("one"), Tmp("arena2"), "--ignore_fingerprint=cores"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--ignore_fingerprint: unknown field \"cores\""));
}

// The gate's exit status: 11 more workers are a regression in thread count
// (exit 1); RSS at 4 vs 3 repeats can never reach a 95 % interval (exit 3);
// without --gate the verdicts are shown and the status is as before.
TEST_F(CompareE2eTest, GateExitStatus) {
  ServerProcess::Result r = Compare({Tmp("one"), Tmp("twelve"), "--gate=threads", "--plot="});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(Row(r.out, "OS threads (max)"), HasSubstr("regression"));
  EXPECT_THAT(r.out, HasSubstr("gate (threads): regression - "));
  r = Compare({Tmp("one"), Tmp("one-again"), "--gate=rss", "--plot="});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_THAT(Row(r.out, "RSS after idle"), HasSubstr("[none]  can't tell"));
  r = Compare({Tmp("one"), Tmp("one-again"), "--plot="});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Compare({Tmp("one"), Tmp("twelve"), "--gate=rss_idle"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--gate=rss_idle: unknown figure"));
}

TEST_F(CompareE2eTest, BadInputIsOneLineAndExit2) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {Tmp("one"), Tmp("twelve"), "--fail_if=rss_idle>+10%"},
           {Tmp("one"), Tmp("twelve"), "--fail_if=threads>10"},
           {Tmp("one")},
           {Tmp("one"), Tmp("nowhere")},
           {Tmp("one"), Tmp("twelve"), "--format=html"}}) {
    ServerProcess::Result r = Compare(args);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace rsslab
