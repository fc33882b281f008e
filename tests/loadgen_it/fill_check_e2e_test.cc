// The fill check end to end (loadgen/results/fill_check.h): a reduced seed run whose
// cache never reached its limit is flagged on the loadgen's stderr, in
// events.jsonl and in summary.md; a run whose fill did evict is not. Real
// rsslab_server and rsslab_loadgen on loopback, a few seconds each.
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/results.pb.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::Events;
using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::ServerProcess;
using ::rsslab::testing::StartServer;
using ::rsslab::testing::Tmp;
using ::rsslab::v1::Event;
using ::testing::HasSubstr;
using ::testing::Not;

// Spelled out here, not taken from loadgen/results/fill_check.h: the test checks the
// words a reader sees.
constexpr char kNeverFilled[] = "cache never filled: not seed 000's conditions";

std::vector<const Event*> FillChecks(const std::vector<Event>& ev) {
  std::vector<const Event*> out;
  for (const Event& e : ev) {
    if (e.has_fill_check()) out.push_back(&e);
  }
  return out;
}

// The summary's "fill" column.
std::string FillColumn(const std::string& csv) {
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  if (lines.size() != 2) return "";
  std::vector<std::string> cols = absl::StrSplit(lines[0], ',');
  std::vector<std::string> vals = absl::StrSplit(lines[1], ',');
  for (size_t i = 0; i < cols.size() && i < vals.size(); ++i) {
    if (cols[i] == "fill") return vals[i];
  }
  return "";
}

// The built-in quick cycle (seed 000's phases and 100 MiB fill limit, 2,000
// fill requests) at scale 0.5: 1,000 fill requests store ~4 MiB. The same
// as seed 000 at scale 0.01, without its 12 s idle wait.
TEST(FillCheckE2E, ReducedRunIsFlagged) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string out = Tmp("reduced");
  auto r = ServerProcess::Run(
      Loadgen(), {"--target=" + server->data_address(), "--control=" + server->control_address(),
                  "--builtin=quick", "--scale=0.5", "--out=" + out});
  ASSERT_EQ(r.exit_code, 0) << r.err;  // flagged, not failed: the run itself is fine
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat("rsslab_loadgen: ", kNeverFilled, " (fill stored ")));

  const auto ev = Events(out);
  const auto checks = FillChecks(ev);
  ASSERT_EQ(checks.size(), 1u);
  const rsslab::v1::FillCheck& c = checks[0]->fill_check();
  EXPECT_FALSE(c.filled());
  EXPECT_EQ(c.evictions(), 0u);
  EXPECT_EQ(c.limit_bytes(), 100 << 20);
  EXPECT_GT(c.stored_bytes(), 0);
  EXPECT_LT(c.stored_bytes(), c.limit_bytes());
  EXPECT_EQ(checks[0]->loadgen_phase(), "shrink");  // written as the fill ended

  const std::string md = ReadFile(out + "/summary.md");
  EXPECT_THAT(md, HasSubstr(absl::StrCat("**Fill check: ", kNeverFilled)));
  EXPECT_THAT(FillColumn(ReadFile(out + "/summary.csv")), ::testing::StartsWith("NEVER("));
  EXPECT_EQ(server->Stop(), 0);
}

// A fill that does evict (a 1 MiB limit, ~3.7 MiB stored) is not flagged:
// the check can fail both ways.
TEST(FillCheckE2E, FillThatEvictsIsNotFlagged) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string scenario = Tmp("small_limit.txtpb");
  std::ofstream(scenario) << R"(name: "small_limit"
step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 1 } }
step { name: "fill" load { requests: 1000 } }
step { name: "after_fill" snapshot { gc: true } }
step { name: "shrink" set_phase { phase: "shrink" } }
)";
  const std::string out = Tmp("filled");
  auto r = ServerProcess::Run(
      Loadgen(), {"--target=" + server->data_address(), "--control=" + server->control_address(),
                  "--scenario=" + scenario, "--out=" + out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr(kNeverFilled)));
  const auto ev = Events(out);
  const auto checks = FillChecks(ev);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0]->fill_check().filled()) << checks[0]->fill_check().verdict() << "\n"
                                                 << r.err;
  EXPECT_GT(checks[0]->fill_check().evictions(), 0u);
  EXPECT_TRUE(checks[0]->fill_check().churned_twice());
  const std::string md = ReadFile(out + "/summary.md");
  EXPECT_THAT(md, HasSubstr("Fill check: cache filled ("));
  EXPECT_THAT(md, Not(HasSubstr(kNeverFilled)));
  EXPECT_THAT(FillColumn(ReadFile(out + "/summary.csv")), ::testing::StartsWith("yes("));
  EXPECT_EQ(server->Stop(), 0);
}

}  // namespace
}  // namespace rsslab
