#include "loadgen/plan.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "loadgen/scenario.h"

namespace rsslab {
namespace {

using ::rsslab::v1::LoadSpec;
using ::rsslab::v1::Scenario;
using ::testing::HasSubstr;
using Kind = PlanStep::Kind;

TEST(PlanTest, QuickCycleResolvesEveryLoadStepAgainstTheFlags) {
  LoadSpec flags;
  flags.set_concurrency(8);
  flags.set_scale(0.5);
  auto sc = BuiltinScenario("quick", flags);
  ASSERT_TRUE(sc.ok()) << sc.status();
  auto plan = BuildPlan(*sc, flags);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->scenario, "quick");
  EXPECT_TRUE(plan->needs_control);
  EXPECT_FALSE(plan->soak);
  ASSERT_EQ(plan->steps.size(), 10u);
  EXPECT_EQ(plan->steps[0].kind, Kind::kSetPhase);
  EXPECT_EQ(plan->steps[0].kind_name, "set_phase");
  EXPECT_EQ(plan->steps[0].name, "fill");
  EXPECT_EQ(plan->steps[0].set_phase.cache_limit_mb(), 100);
  const PlanStep& fill = plan->steps[1];
  EXPECT_EQ(fill.kind, Kind::kLoad);
  EXPECT_EQ(fill.kind_name, "load");
  EXPECT_EQ(fill.load.requests(), 1000u);  // 2,000 scaled by 0.5
  EXPECT_EQ(fill.load.concurrency(), 8u);
  EXPECT_EQ(fill.load.channels(), kDefaultChannels);
  EXPECT_EQ(fill.load.deadline_ms(), kDefaultDeadlineMs);
  EXPECT_EQ(fill.load.seed(), 1u);
  EXPECT_EQ(plan->steps[2].kind, Kind::kSnapshot);
  EXPECT_TRUE(plan->steps[2].snapshot.gc());
  EXPECT_EQ(plan->steps[7].kind, Kind::kWait);
  EXPECT_EQ(plan->steps[7].wait_s, 1);
  EXPECT_EQ(plan->steps[9].kind, Kind::kSetPhase);
  EXPECT_EQ(plan->steps[9].set_phase.phase(), "trim");
}

TEST(PlanTest, SoakRepeatHoldsItsResolvedStepsAndTheWatchInterval) {
  auto sc = BuiltinScenario("soak", LoadSpec());
  ASSERT_TRUE(sc.ok()) << sc.status();
  ApplySoakDuration(&*sc, 60);
  auto plan = BuildPlan(*sc, LoadSpec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->soak);
  EXPECT_EQ(plan->watch_interval_s, 5);
  ASSERT_EQ(plan->steps.size(), 1u);
  const PlanStep& rep = plan->steps[0];
  EXPECT_EQ(rep.kind, Kind::kRepeat);
  EXPECT_EQ(rep.times, 0u);
  EXPECT_EQ(rep.duration_s, 60);
  ASSERT_EQ(rep.steps.size(), 10u);
  EXPECT_EQ(rep.steps[1].kind, Kind::kLoad);
  EXPECT_EQ(rep.steps[1].load.requests(), 20000u);
  EXPECT_EQ(rep.steps[1].load.concurrency(), kDefaultConcurrency);
}

TEST(PlanTest, LoadOnlyRunNeedsNoControlAndTakesTheFlags) {
  LoadSpec flags;
  flags.set_rate(200);
  flags.set_duration_s(3);
  auto plan = BuildPlan(AdHocScenario(), flags);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_FALSE(plan->needs_control);
  ASSERT_EQ(plan->steps.size(), 1u);
  EXPECT_EQ(plan->steps[0].name, "load");
  EXPECT_EQ(plan->steps[0].load.rate(), 200);
  EXPECT_EQ(plan->steps[0].load.arrival(), "constant");
  EXPECT_EQ(plan->steps[0].load.duration_s(), 3);
  EXPECT_EQ(plan->steps[0].load.concurrency(), 0u);
}

// Validation resolved the step with the flags it was given; the plan is
// built with the flags the run uses (a soak's --duration is taken off them),
// so a step that only ended by --duration fails here, naming the step,
// before anything is sent.
TEST(PlanTest, AStepThatDoesNotResolveIsNamedWithItsPath) {
  Scenario sc;
  auto* rep = sc.add_step();
  rep->set_name("soak");
  rep->mutable_repeat()->set_duration_s(60);
  rep->mutable_repeat()->add_step()->mutable_wait()->set_seconds(1);
  auto* load = rep->mutable_repeat()->add_step();
  load->set_name("fill");
  load->mutable_load();
  auto plan = BuildPlan(sc, LoadSpec());
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("step 1 \"soak\": repeat: step 2 \"fill\": load: a load step "
                        "needs requests or duration_s"));
}

std::string NestedLoad(int depth, uint64_t times, const std::string& load) {
  std::string s = "step { name: \"l\" load { " + load + " } }";
  for (int i = 0; i < depth; ++i) {
    s = absl::StrCat("step { repeat { times: ", times, " ", s, " } }");
  }
  return s;
}

// BuildPlan's error ("" when it builds), on a scenario that skipped
// ParseScenario's checks.
std::string Plan(const std::string& text, const LoadSpec& flags = LoadSpec()) {
  Scenario sc;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &sc)) << text;
  return std::string(BuildPlan(sc, flags).status().message());
}

// Third pass: nested repeats giving 1000^3 x 1.1e12 closed-loop requests
// were accepted (the run-time check skipped closed-loop counts) and sent.
// Now every plan's requests and time are bounded after the repeats are
// multiplied out, closed and open loop, naming the step that crosses.
TEST(PlanBounds, NestedRepeatsAreMultipliedOutBeforeAnythingIsSent) {
  const std::string s = Plan(NestedLoad(3, 1000, "requests: 1100000000000 concurrency: 1"));
  EXPECT_THAT(s, HasSubstr("step 1: repeat: step 1: repeat: step 1: repeat: step 1 \"l\": "
                                     "load: the steps up to here would send 1.1e+12 requests"));
  EXPECT_THAT(s, HasSubstr("a run sends at most 1099511627776"));
  // Each repeat within the bound alone; their product is not (1e6 x 1000
  // x 1000 = 1e12 is within 2^40, one more x 1000 is not).
  EXPECT_THAT(Plan(NestedLoad(3, 1000, "requests: 1000000 concurrency: 1")),
              HasSubstr("step 1: repeat (1000 x 1000000000000 requests): the steps up to here "
                        "would send 1e+15 requests"));
  EXPECT_THAT(Plan(NestedLoad(4, 1000, "requests: 1000000 concurrency: 1")),
              HasSubstr("step 1: repeat: step 1: repeat (1000 x 1000000000000 requests)"));
  // Saturating, never wrapping: 4e9 x 1e12 is past 2^64.
  EXPECT_THAT(Plan(NestedLoad(1, 4000000000u, "requests: 1000000000000 concurrency: 1")),
              HasSubstr("step 1: repeat (4000000000 x 1000000000000 requests): the steps up to "
                        "here would send over 1.8e19 requests"));
  // Open loop: the requests and the time they take at the rate.
  EXPECT_THAT(Plan(NestedLoad(2, 1000, "requests: 100000000 rate: 1e7")),
              HasSubstr("would send"));
  EXPECT_THAT(Plan(NestedLoad(2, 1000, "requests: 1000 rate: 0.1")),
              HasSubstr("maximum run time is 2592000 s"));
  // The flags' layer counts too (--requests under a scenario's repeats).
  LoadSpec flags;
  flags.set_requests(uint64_t{1} << 30);
  EXPECT_THAT(Plan("step { repeat { times: 2000 step { load { concurrency: 1 } } } }", flags),
              HasSubstr("would send 2.147e+12 requests"));
  // ParseScenario refuses the same, with the file's name first.
  auto parsed = ParseScenario(NestedLoad(3, 1000, "requests: 1000000 concurrency: 1"), "t.txtpb",
                              LoadSpec());
  EXPECT_THAT(parsed.status().message(), HasSubstr("t.txtpb: step 1: repeat (1000 x 1000000000000 requests)"));
  // Within the bounds: 1000 x 1e9 requests, a 30-day soak of short cycles.
  EXPECT_EQ(Plan(NestedLoad(1, 1000, "requests: 1000000000 concurrency: 1")), "");
  EXPECT_EQ(Plan("step { repeat { duration_s: 2592000 step { load { requests: 1000000000 "
                 "concurrency: 1 } } } }"),
            "");
}

}  // namespace
}  // namespace rsslab
