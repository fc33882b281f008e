#include "loadgen/plan.h"

#include <string>

#include "gmock/gmock.h"
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

}  // namespace
}  // namespace rsslab
