#include "loadgen/scenario.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::rsslab::v1::LoadSpec;
using ::rsslab::v1::Scenario;
using ::testing::HasSubstr;
using ::testing::Not;

LoadSpec NoFlags() { return LoadSpec(); }

std::string ErrorOf(const std::string& text, const LoadSpec& flags = NoFlags()) {
  auto sc = ParseScenario(text, "t.txtpb", flags);
  EXPECT_FALSE(sc.ok()) << "accepted:\n" << text;
  return sc.ok() ? "" : std::string(sc.status().message());
}

TEST(ScenarioTest, SeedBuiltinIsSeed000Exactly) {
  auto sc = BuiltinScenario("seed", NoFlags());
  ASSERT_TRUE(sc.ok()) << sc.status();
  ASSERT_EQ(sc->step_size(), 10);
  EXPECT_EQ(sc->step(0).set_phase().phase(), "fill");
  EXPECT_EQ(sc->step(0).set_phase().cache_limit_mb(), 100);
  EXPECT_EQ(sc->step(1).load().requests(), 96000u);
  EXPECT_TRUE(sc->step(2).snapshot().gc());
  EXPECT_EQ(sc->step(3).set_phase().phase(), "shrink");
  EXPECT_EQ(sc->step(3).set_phase().cache_limit_mb(), 10);
  EXPECT_EQ(sc->step(4).load().requests(), 48000u);
  EXPECT_TRUE(sc->step(5).snapshot().gc());
  EXPECT_EQ(sc->step(6).set_phase().phase(), "idle");
  EXPECT_EQ(sc->step(7).wait().seconds(), 12);
  EXPECT_TRUE(sc->step(8).snapshot().gc());
  EXPECT_EQ(sc->step(9).set_phase().phase(), "trim");
  EXPECT_TRUE(NeedsControl(*sc));
}

TEST(ScenarioTest, ScaleShrinksRequestCountsUniformly) {
  LoadSpec flags;
  flags.set_scale(0.01);
  auto sc = BuiltinScenario("seed", flags);
  ASSERT_TRUE(sc.ok()) << sc.status();
  auto fill = ResolveLoad(sc->step(1).load(), sc->load_defaults(), flags);
  auto shrink = ResolveLoad(sc->step(4).load(), sc->load_defaults(), flags);
  ASSERT_TRUE(fill.ok() && shrink.ok());
  EXPECT_EQ(fill->requests(), 960u);
  EXPECT_EQ(shrink->requests(), 480u);
  EXPECT_EQ(fill->concurrency(), kDefaultConcurrency);
  EXPECT_EQ(fill->channels(), kDefaultChannels);
}

TEST(ScenarioTest, QuickBuiltinAndUnknownBuiltin) {
  EXPECT_TRUE(BuiltinScenario("quick", NoFlags()).ok());
  auto bad = BuiltinScenario("sede", NoFlags());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("unknown builtin scenario \"sede\" (known: seed, quick, sweep, soak)"));
}

TEST(ScenarioTest, SyntaxErrorsNameFileLineAndColumn) {
  const std::string text =
      "name: \"x\"\n"
      "step { load { requests: 10 } }\n"
      "step { lod { requests: 10 } }\n";
  EXPECT_THAT(ErrorOf(text), HasSubstr("t.txtpb:3:"));
  EXPECT_THAT(ErrorOf(text), HasSubstr("lod"));
  // Negative counts are rejected by the unsigned field itself.
  EXPECT_THAT(ErrorOf("step {\n load { requests: -5 }\n}\n"),
              HasSubstr("t.txtpb:2:"));
}

TEST(ScenarioTest, UnknownPhaseNamesItsLine) {
  const std::string text =
      "name: \"x\"\n"
      "step { set_phase { phase: \"fill\" } }\n"
      "step {\n"
      "  name: \"oops\"\n"
      "  set_phase {\n"
      "    phase: \"fil\"\n"
      "  }\n"
      "}\n";
  const std::string err = ErrorOf(text);
  EXPECT_THAT(err, HasSubstr("t.txtpb:6: step 2 \"oops\": set_phase: unknown "
                             "phase \"fil\""));
}

TEST(ScenarioTest, ContradictionsAndNegativesNameTheirLines) {
  const std::string text =
      "step { set_phase { phase: \"fill\" cache_limit_mb: -1 } }\n"  // 1
      "step { load {\n"                                              // 2
      "  rate: 100\n"                                                // 3
      "  concurrency: 8\n"                                           // 4
      "  requests: 10\n"                                             // 5
      "} }\n"                                                        // 6
      "step { load { requests: 10\n"                                 // 7
      "  duration_s: 3 } }\n"                                        // 8
      "step { wait { seconds: -2 } }\n"                              // 9
      "step { }\n"                                                   // 10
      "step { repeat { times: 2 } }\n"                               // 11
      "step { load { rate: -3 duration_s: 1 } }\n"                   // 12
      "step { load { concurrency: 2 channels: 4 requests: 1 } }\n"   // 13
      "step { load { rate: 5 arrival: \"bursty\" requests: 1 } }\n"; // 14
  const std::string err = ErrorOf(text);
  EXPECT_THAT(err, HasSubstr("t.txtpb:1: step 1: set_phase: cache_limit_mb is -1"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:4: step 2: load: rate (open loop"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:8: step 3: load: requests and duration_s"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:9: step 4: wait: wait needs seconds > 0"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:10: step 5: empty step"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:11: step 6: repeat: repeat has no steps"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:12: step 7: load: rate must be"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:13: step 8: load: 4 channels for 2"));
  EXPECT_THAT(err, HasSubstr("t.txtpb:14: step 9: load: unknown arrival \"bursty\""));
}

TEST(ScenarioTest, EmptyScenarioAndMissingEndCondition) {
  EXPECT_THAT(ErrorOf("name: \"nothing\"\n"), HasSubstr("t.txtpb: the scenario has no steps"));
  EXPECT_THAT(ErrorOf("step {\n  load { concurrency: 4 }\n}\n"),
              HasSubstr("t.txtpb:2: step 1: load: a load step needs requests or duration_s"));
  // ...which the flags can supply.
  LoadSpec flags;
  flags.set_duration_s(2);
  EXPECT_TRUE(ParseScenario("step { load { concurrency: 4 } }", "t", flags).ok());
}

TEST(ScenarioTest, NestedRepeatErrorsPointInside) {
  const std::string text =
      "step {\n"
      "  repeat {\n"
      "    times: 3\n"
      "    step { set_phase { phase: \"shrink\" } }\n"
      "    step {\n"
      "      wait { seconds: 0 }\n"
      "    }\n"
      "  }\n"
      "}\n";
  EXPECT_THAT(ErrorOf(text), HasSubstr("t.txtpb:6: step 1: repeat: step 2: wait"));
}

TEST(ScenarioTest, SweepMatrixIsChecked) {
  EXPECT_THAT(ErrorOf("step { wait { seconds: 1 } }\nsweep { threads: 1 }\n"),
              HasSubstr("t.txtpb:2: sweep: sweep needs at least one profile"));
  EXPECT_THAT(ErrorOf("step { wait { seconds: 1 } }\n"
                      "sweep { profiles: \"glibc\" threads: [1, 0] }\n"),
              HasSubstr("thread count 0 is outside 1..1024"));
  EXPECT_THAT(ErrorOf("step { wait { seconds: 1 } }\n"
                      "sweep { profiles: \"../lib.so\" threads: 1 }\n"),
              HasSubstr("is not a profile name"));
}

TEST(ScenarioTest, BuiltinSweepIsSeed000sMatrix) {
  auto sc = BuiltinScenario("sweep", LoadSpec());
  ASSERT_TRUE(sc.ok()) << sc.status();
  EXPECT_THAT(sc->sweep().threads(), ::testing::ElementsAre(1, 4, 16, 64));
  EXPECT_EQ(sc->sweep().repeats(), 5u);
  EXPECT_THAT(sc->sweep().profiles(), ::testing::Contains("glibc-arena2"));
  EXPECT_EQ(sc->step_size(), 10);
}

TEST(ScenarioTest, ContradictoryFlagsAreRejected) {
  LoadSpec flags;
  flags.set_rate(100);
  flags.set_concurrency(4);
  flags.set_requests(10);
  EXPECT_THAT(ErrorOf("step { wait { seconds: 1 } }", flags),
              HasSubstr("flags: rate (open loop"));
}

TEST(ScenarioTest, PrecedenceStepThenDefaultsThenFlags) {
  LoadSpec flags;
  flags.set_concurrency(8);
  flags.set_channels(2);
  flags.set_requests(100);
  flags.set_deadline_ms(500);
  (*flags.mutable_params())["a"] = "flag";
  (*flags.mutable_params())["b"] = "flag";
  LoadSpec defaults;
  defaults.set_rate(1000);  // open loop beats the flags' closed loop
  (*defaults.mutable_params())["b"] = "defaults";
  LoadSpec step;
  step.set_duration_s(3);
  auto r = ResolveLoad(step, defaults, flags);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rate(), 1000);
  EXPECT_EQ(r->concurrency(), 0u);
  EXPECT_EQ(r->arrival(), "constant");
  EXPECT_EQ(r->max_outstanding(), kDefaultMaxOutstanding);
  EXPECT_EQ(r->channels(), 2u);
  EXPECT_EQ(r->duration_s(), 3);
  EXPECT_EQ(r->requests(), 0u);
  EXPECT_EQ(r->deadline_ms(), 500u);
  EXPECT_EQ(r->params().at("a"), "flag");
  EXPECT_EQ(r->params().at("b"), "defaults");
  // The default channel count shrinks to a small concurrency.
  LoadSpec one;
  one.set_concurrency(1);
  one.set_requests(5);
  auto r1 = ResolveLoad(one, LoadSpec(), LoadSpec());
  ASSERT_TRUE(r1.ok());
  EXPECT_EQ(r1->channels(), 1u);
}

TEST(ScenarioTest, AdHocScenarioTakesEverythingFromFlags) {
  Scenario sc = AdHocScenario();
  EXPECT_FALSE(NeedsControl(sc));
  LoadSpec flags;
  flags.set_requests(7);
  auto r = ResolveLoad(sc.step(0).load(), sc.load_defaults(), flags);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->requests(), 7u);
}

}  // namespace
}  // namespace rsslab

namespace rsslab {
namespace {

TEST(SoakScenario, BuiltinCyclesUntilDurationAndDurationFlagSetsTheLength) {
  auto sc = BuiltinScenario("soak", rsslab::v1::LoadSpec());
  ASSERT_TRUE(sc.ok()) << sc.status();
  ASSERT_TRUE(sc->has_soak());
  EXPECT_EQ(sc->soak().watch_interval_s(), 5);
  ASSERT_EQ(sc->step_size(), 1);
  ASSERT_TRUE(sc->step(0).has_repeat());
  EXPECT_EQ(sc->step(0).repeat().step(1).load().requests(), 20000u);
  EXPECT_EQ(sc->step(0).repeat().step(4).load().requests(), 10000u);
  EXPECT_TRUE(NeedsControl(*sc));
  ApplySoakDuration(&*sc, 4 * 3600);
  EXPECT_EQ(sc->step(0).repeat().duration_s(), 4 * 3600);
  EXPECT_EQ(sc->step(0).repeat().times(), 0u);
}

TEST(ScenarioTest, WaitSecondsReachEveryWaitStepInsideRepeatsToo) {
  absl::StatusOr<Scenario> sc = BuiltinScenario("soak", LoadSpec());
  ASSERT_TRUE(sc.ok()) << sc.status();
  int before = 0;
  for (const rsslab::v1::Step& s : sc->step(0).repeat().step()) before += s.has_wait() && s.wait().seconds() > 2;
  ASSERT_GT(before, 0) << "the soak's cycle has an idle wait";
  ApplyWaitSeconds(&*sc, 2);
  int waits = 0;
  for (const rsslab::v1::Step& s : sc->step(0).repeat().step()) {
    if (!s.has_wait()) continue;
    ++waits;
    EXPECT_EQ(s.wait().seconds(), 2) << s.name();
  }
  EXPECT_EQ(waits, before);
  absl::StatusOr<Scenario> seed = BuiltinScenario("seed", LoadSpec());
  ASSERT_TRUE(seed.ok());
  ApplyWaitSeconds(&*seed, 0.5);
  int top = 0;
  for (const rsslab::v1::Step& s : seed->step()) {
    if (!s.has_wait()) continue;
    EXPECT_EQ(s.wait().seconds(), 0.5) << s.name();
    ++top;
  }
  EXPECT_GT(top, 0) << "seed 000 has its idle wait at the top level";
}

TEST(SoakScenario, BadSoakSettingsNameTheirLine) {
  auto sc = ParseScenario(
      "name: \"s\"\nsoak {\n  watch_interval_s: -1\n}\n"
      "step { wait { seconds: 1 } }\n",
      "s.txtpb", rsslab::v1::LoadSpec());
  ASSERT_FALSE(sc.ok());
  EXPECT_THAT(std::string(sc.status().message()),
              ::testing::HasSubstr("s.txtpb:3: soak: watch_interval_s must be"));
}


// Hardening classes 1 and 3 (docs/RELIABILITY.md): nesting, totals and every field checked before
// anything is sent.
std::string Nested(int depth, const std::string& inner) {
  std::string t = "step { " + inner + " }";
  for (int i = 0; i < depth; ++i) t = "step { repeat { times: 1 " + t + " } }";
  return t;
}

TEST(ScenarioLimits, RepeatDepthIsLimitedBeforeTheStackIs) {
  // 5,000 levels once crashed the loadgen; now the parser stops early.
  std::string e = ErrorOf(Nested(5000, "wait { seconds: 1 }"));
  EXPECT_THAT(e, HasSubstr("nested too deep: at most 16 levels of repeat"));
  EXPECT_LT(e.size(), 400u) << e;
  EXPECT_THAT(ErrorOf(Nested(17, "wait { seconds: 1 }")),
              HasSubstr("at most 16 levels of repeat"));
  auto ok = ParseScenario(Nested(16, "load { requests: 1 params { key: \"a\" value: \"b\" } }"),
                          "t.txtpb", NoFlags());
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(ScenarioLimits, TotalsAndRatesAgainstTheMaximumRunTime) {
  EXPECT_THAT(ErrorOf("step { repeat { times: 4000000000 step { wait { seconds: 1 } } } }"),
              HasSubstr("the maximum run time is 2592000 s"));
  EXPECT_THAT(ErrorOf("step { repeat { times: 1000 step { repeat { times: 1000 step { load { "
                      "duration_s: 10 concurrency: 1 } } } } } }"),
              HasSubstr("maximum run time"));
  EXPECT_THAT(ErrorOf("step { load { rate: 1e-10 duration_s: 2 } }"), HasSubstr("rate"));
  LoadSpec flags;
  flags.set_rate(1e-9);
  flags.set_requests(3);
  EXPECT_THAT(ErrorOf("step { load { } }", flags), HasSubstr("rate"));
  flags.set_rate(0.5);
  flags.set_requests(uint64_t{1} << 30);
  EXPECT_THAT(ErrorOf("step { load { } }", flags), HasSubstr("maximum run time"));
  // Within the bound: a day of 1 s waits.
  EXPECT_TRUE(
      ParseScenario("step { repeat { times: 86400 step { wait { seconds: 1 } } } }", "t", NoFlags())
          .ok());
}

TEST(ScenarioLimits, EveryFieldIsValidatedBeforeAnyRequest) {
  EXPECT_THAT(ErrorOf("step { trim { mode: 99 } }"), HasSubstr("trim mode 99"));
  // Control characters in any string: refused, and echoed escaped.
  std::string e = ErrorOf("name: \"a\\x1b[2Jb\" step { wait { seconds: 1 } }");
  EXPECT_THAT(e, HasSubstr("control character"));
  EXPECT_THAT(e, HasSubstr("\\x1b[2J"));
  EXPECT_EQ(e.find('\x1b'), std::string::npos);
  EXPECT_THAT(ErrorOf("step { name: \"x\\r\\nFAKE\" wait { seconds: 1 } }"),
              HasSubstr("control character"));
  EXPECT_THAT(ErrorOf("step { load { requests: 1 params { key: \"k\" value: \"\\n\" } } }"),
              HasSubstr("step[0].load.params[0].value"));
  EXPECT_THAT(ErrorOf("name: \"" + std::string(2000, 'n') + "\" step { wait { seconds: 1 } }"),
              HasSubstr("at most 1024"));
  // Not UTF-8 (found by the scenario fuzz target): it would be written into
  // events.jsonl's header, which then would not parse.
  e = ErrorOf("description: \"idle 12 s,\xe0\x8b\x8d m\" step { wait { seconds: 1 } }");
  EXPECT_THAT(e, HasSubstr("description is not valid UTF-8"));
  EXPECT_THAT(e, HasSubstr("\\xe0\\x8b\\x8d"));
  EXPECT_THAT(ErrorOf("step { name: \"\xff\" wait { seconds: 1 } }"),
              HasSubstr("step[0].name is not valid UTF-8"));
}

}  // namespace
}  // namespace rsslab
