// compare over run directories written here with the loadgen's own EventLog:
// pairing (by key, across one profile per side, by the only group), the
// figures read as the summaries read them, significance and "~", the
// refusals (scale, steps, a cache that never filled) and --force,
// thresholds, the three output formats, and where the plot goes by default.
#include "loadgen/results/compare.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "loadgen/results/compare_main.h"
#include "loadgen/results/event_log.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kMiB = 1048576.0;

std::string Tmp(const std::string& name) { return absl::StrCat(getenv("TEST_TMPDIR"), "/", name); }

struct Cell {
  double idle_mib = 100;
  double qps = 1000;
  int threads_seen = 20;
  int64_t evictions = 50;
  std::string arena_max;  // MALLOC_ARENA_MAX in the server's environment
  bool fingerprint = false;  // snapshots carry a Fingerprint (newer runs)
  int cpus = 2;              // its cpus_online and cpus_allowed
};

Event Header(bool sweep, double scale, int fill_requests) {
  Event h;
  auto* sc = h.mutable_header()->mutable_scenario();
  sc->set_name(sweep ? "sweep" : "seed");
  h.mutable_header()->set_scenario_name(sc->name());
  if (sweep) sc->mutable_sweep()->add_profiles("glibc");
  auto* fill = sc->add_step();
  fill->set_name("fill");
  fill->mutable_set_phase()->set_phase("fill");
  auto* load = sc->add_step();
  load->set_name("fill");
  load->mutable_load()->set_requests(fill_requests);
  h.mutable_header()->mutable_flags()->set_scale(scale);
  return h;
}

// One cell's (or run's) records: fill load, snapshots after fill, shrink and
// idle, a trim phase with both passes.
void AddRecords(EventLog* log, const std::string& profile, int threads, int repeat,
                const Cell& c) {
  auto tag = [&](Event e, const std::string& phase) {
    if (!profile.empty()) {
      e.set_cell(absl::StrCat(profile, "/t", threads, "/r", repeat));
      e.set_profile(profile);
      e.set_threads(threads);
      e.set_repeat(repeat);
    }
    e.set_loadgen_phase(phase);
    ASSERT_TRUE(log->Append(e).ok());
  };
  auto snap = [&](const std::string& phase, double rss_mib) {
    Event e;
    auto* s = e.mutable_snapshot();
    s->mutable_status()->set_rss_bytes(static_cast<int64_t>(rss_mib * kMiB));
    s->mutable_status()->set_hwm_bytes(static_cast<int64_t>(150 * kMiB));
    s->mutable_status()->set_threads(c.threads_seen);
    s->mutable_memory_map()->set_arena_count(8);
    s->mutable_config()->set_threads(threads);
    // The fill check (loadgen/results/fill_check.h) reads these: a fill that
    // evicted and stored at least the limit filled the cache.
    auto* cache = s->mutable_cache();
    cache->set_cache_limit_bytes(static_cast<int64_t>(100 * kMiB));
    cache->set_evictions(c.evictions);
    cache->set_cache_bytes(static_cast<int64_t>((c.evictions > 0 ? 100 : 60) * kMiB));
    cache->set_evicted_bytes(static_cast<int64_t>((c.evictions > 0 ? 50 : 0) * kMiB));
    s->set_allocator("glibc");
    if (!c.arena_max.empty()) (*s->mutable_allocator_env())["MALLOC_ARENA_MAX"] = c.arena_max;
    if (c.fingerprint) {
      auto* f = s->mutable_fingerprint();
      f->set_glibc_version("2.36");
      f->set_allocator("glibc");
      f->set_allocator_version("2.36");
      f->set_cpus_online(c.cpus);
      f->set_cpus_allowed(c.cpus);
      f->set_cgroup_cpu_max("max");
      f->set_thp_enabled("madvise");
      *f->mutable_start_env() = s->allocator_env();
    }
    tag(e, phase);
  };
  Event load;
  load.mutable_load()->set_qps(c.qps);
  load.mutable_load()->set_requests_ok(static_cast<uint64_t>(c.qps));
  load.mutable_load()->set_elapsed_s(1);
  load.mutable_load()->mutable_latency()->set_p50_us(2000);
  load.mutable_load()->mutable_latency()->set_p99_us(9000);
  tag(load, "fill");
  snap("fill", 140);
  snap("shrink", c.idle_mib + 1);
  snap("idle", c.idle_mib);
  Event trim;
  trim.mutable_phase()->mutable_snapshot()->mutable_status()->set_rss_bytes(
      static_cast<int64_t>(40 * kMiB));
  trim.mutable_phase()->mutable_trim()->set_per_thread(true);
  trim.mutable_phase()->mutable_trim()->set_rss_between_bytes(static_cast<int64_t>(45 * kMiB));
  trim.mutable_phase()->mutable_trim()->set_rss_after_bytes(static_cast<int64_t>(40 * kMiB));
  tag(trim, "trim");
  if (!profile.empty()) {
    Event done;
    done.mutable_cell_result()->set_ok(true);
    tag(done, "trim");
  }
}

void Footer(EventLog* log, bool completed = true) {
  Event f;
  f.mutable_footer()->set_completed(completed);
  if (!completed) f.mutable_footer()->set_error("step 3 failed");
  ASSERT_TRUE(log->Append(f).ok());
}

// A sweep directory: `profile` at `threads`, one cell per entry of `cells`.
std::string Sweep(const std::string& name, const std::string& profile, int threads,
                  const std::vector<Cell>& cells, double scale = 0.5, int fill_requests = 96000) {
  const std::string dir = Tmp(name);
  auto log = EventLog::Create(dir, false);
  EXPECT_TRUE(log.ok()) << log.status();
  EXPECT_TRUE((*log)->Append(Header(true, scale, fill_requests)).ok());
  for (size_t i = 0; i < cells.size(); ++i) {
    AddRecords(log->get(), profile, threads, static_cast<int>(i) + 1, cells[i]);
  }
  Footer(log->get());
  return dir;
}

// A directory of single runs, one subdirectory each.
std::string Runs(const std::string& name, int workers, const std::vector<Cell>& runs,
                 bool last_incomplete = false) {
  for (size_t i = 0; i < runs.size(); ++i) {
    auto log = EventLog::Create(Tmp(absl::StrCat(name, "/run", i)), false);
    EXPECT_TRUE(log.ok()) << log.status();
    EXPECT_TRUE((*log)->Append(Header(false, 1, 96000)).ok());
    AddRecords(log->get(), "", workers, 0, runs[i]);
    Footer(log->get(), !(last_incomplete && i + 1 == runs.size()));
  }
  return Tmp(name);
}

std::vector<Cell> Idle(std::vector<double> mib) {
  std::vector<Cell> out;
  double qps = 1000;
  for (double m : mib) {
    Cell c;
    c.idle_mib = m;
    c.qps = qps;
    qps += 10;
    out.push_back(c);
  }
  return out;
}

absl::StatusOr<CompareResult> CompareDirs(const std::string& a, const std::string& b,
                                  CompareOptions o = {}) {
  auto base = LoadCompareSide(a);
  if (!base.ok()) return base.status();
  auto neu = LoadCompareSide(b);
  if (!neu.ok()) return neu.status();
  return Compare(*base, *neu, o);
}

TEST(CompareTest, FourAgainstFourSeparatedIsSignificantAndCrossesAThreshold) {
  const std::string a = Sweep("sig-a", "glibc", 64, Idle({100, 101, 102, 103}));
  const std::string b = Sweep("sig-b", "glibc", 64, Idle({120, 121, 122, 123}));
  CompareOptions o;
  o.thresholds = {*ParseThreshold("rss_after_idle>+10%"), *ParseThreshold("rss_after_idle>+30%"),
                  *ParseThreshold("qps<-5%")};
  auto r = CompareDirs(a, b, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pairs.size(), 1u);
  const PairResult& p = r->pairs[0];
  EXPECT_EQ(p.base_label, "glibc x 64 threads");
  EXPECT_EQ(p.n_base, 4);
  EXPECT_EQ(r->pairing, "by profile x threads");
  const FigureResult& idle = p.figure[kFigRssAfterIdle];
  ASSERT_TRUE(idle.present);
  EXPECT_NEAR(idle.base_median / kMiB, 101.5, 0.01);
  EXPECT_NEAR(idle.new_median / kMiB, 121.5, 0.01);
  EXPECT_NEAR(idle.change_pct, 20 / 101.5 * 100, 0.01);
  EXPECT_NEAR(idle.test.p, 2.0 / 70, 1e-9);
  EXPECT_TRUE(idle.significant);
  // Equal on both sides: tied, p = 1.
  EXPECT_FALSE(p.figure[kFigRssUnderLoad].significant);
  EXPECT_DOUBLE_EQ(p.figure[kFigThreads].test.p, 1);
  // QPS the same on both sides (1000..1030): not significant.
  EXPECT_FALSE(p.figure[kFigQps].significant);
  // Every figure of the summary is there, from the same records.
  for (int f = 0; f < kNumCompareFigures; ++f) EXPECT_TRUE(p.figure[f].present) << f;
  EXPECT_NEAR(p.figure[kFigRssTrimGlobal].base_median / kMiB, 45, 0.01);
  EXPECT_NEAR(p.figure[kFigRssTrimPerThread].base_median / kMiB, 40, 0.01);
  EXPECT_NEAR(p.figure[kFigP50].base_median, 2000, 1e-9);
  EXPECT_NEAR(p.figure[kFigArenas].base_median, 8, 1e-9);
  ASSERT_EQ(r->crossings.size(), 1u);
  EXPECT_EQ(r->crossings[0].spec, "rss_after_idle>+10%");
  EXPECT_TRUE(r->Unreachable().empty());
  const std::string text = CompareText(*r);
  EXPECT_THAT(text, HasSubstr("RSS after idle (MiB)"));
  EXPECT_THAT(text, HasSubstr("+19.7%"));
  EXPECT_THAT(text, HasSubstr("worse"));
  EXPECT_THAT(text, HasSubstr("FAIL rss_after_idle>+10%"));
  EXPECT_THAT(CompareMarkdown(*r), HasSubstr("| RSS after idle (MiB) | 101.5 | 121.5 | +19.7% |"));
  google::protobuf::Struct json;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(CompareJson(*r), &json).ok())
      << CompareJson(*r);
  EXPECT_EQ(json.fields().at("pairs").list_value().values_size(), 1);
  EXPECT_EQ(json.fields().at("crossings").list_value().values_size(), 1);
}

TEST(CompareTest, ThreeRepeatsASideCanNeverBeSignificant) {
  const std::string a = Sweep("few-a", "glibc", 64, Idle({100, 101, 102}));
  const std::string b = Sweep("few-b", "glibc", 64, Idle({150, 151, 152}));
  CompareOptions o;
  o.thresholds = {*ParseThreshold("rss_after_idle>+10%")};
  auto r = CompareDirs(a, b, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const FigureResult& idle = r->pairs[0].figure[kFigRssAfterIdle];
  EXPECT_NEAR(idle.test.p, 0.1, 1e-9);
  EXPECT_FALSE(idle.significant);
  EXPECT_TRUE(r->crossings.empty());
  EXPECT_THAT(r->Unreachable(), ::testing::ElementsAre("rss_after_idle>+10%"));
  const std::string text = CompareText(*r);
  EXPECT_THAT(text, HasSubstr("the smallest p the test can give is 0.100"));
  EXPECT_THAT(text, HasSubstr("4 vs 4 repeats can reach 0.029"));
  EXPECT_THAT(text, Not(HasSubstr("worse")));
}

TEST(CompareTest, OneProfileASidePairsByThreads) {
  const std::string a = Sweep("prof-a", "glibc", 64, Idle({100, 101, 102, 103}));
  const std::string b = Sweep("prof-b", "glibc-arena2", 64, Idle({90, 91, 92, 93}));
  auto r = CompareDirs(a, b);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pairs.size(), 1u);
  EXPECT_EQ(r->pairing, "glibc against glibc-arena2 at equal threads");
  EXPECT_THAT(CompareText(*r), HasSubstr("glibc x 64 threads -> glibc-arena2 x 64 threads"));
  EXPECT_THAT(CompareText(*r), HasSubstr("better"));
}

TEST(CompareTest, AtProfileSelectsOneSetupOfASweep) {
  // One sweep directory with two profiles: SWEEP@a against SWEEP@b.
  const std::string dir = Tmp("two-profiles");
  auto log = EventLog::Create(dir, false);
  ASSERT_TRUE(log.ok());
  ASSERT_TRUE((*log)->Append(Header(true, 0.5, 96000)).ok());
  std::vector<Cell> glibc = Idle({100, 101, 102, 103}), arena2 = Idle({90, 91, 92, 93});
  for (int i = 0; i < 4; ++i) {
    AddRecords(log->get(), "glibc", 64, i + 1, glibc[i]);
    AddRecords(log->get(), "glibc-arena2", 64, i + 1, arena2[i]);
  }
  Footer(log->get());
  auto r = CompareDirs(dir + "@glibc", dir + "@glibc-arena2");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pairs.size(), 1u);
  EXPECT_EQ(r->pairs[0].new_label, "glibc-arena2 x 64 threads");
  EXPECT_TRUE(r->pairs[0].figure[kFigRssAfterIdle].significant);
  auto none = LoadCompareSide(dir + "@jemalloc");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(),
              HasSubstr("no completed jemalloc in " + dir + " (it holds: glibc, glibc-arena2)"));
}

TEST(CompareTest, NotComparableIsRefusedUnlessForced) {
  const std::string a = Sweep("ref-a", "glibc", 4, Idle({100, 101, 102, 103}), 0.5);
  const std::string scale = Sweep("ref-scale", "glibc", 4, Idle({100, 101, 102, 103}), 0.2);
  const std::string steps =
      Sweep("ref-steps", "glibc", 4, Idle({100, 101, 102, 103}), 0.5, 50000);
  std::vector<Cell> unfilled = Idle({100, 101, 102, 103});
  unfilled[2].evictions = 0;
  const std::string cold = Sweep("ref-cold", "glibc", 4, unfilled);

  auto r = CompareDirs(a, scale);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Refused());
  EXPECT_THAT(r->pairs[0].refused, HasSubstr("different scale: 0.5 in"));
  EXPECT_THAT(CompareText(*r), HasSubstr("NOT COMPARABLE"));

  r = CompareDirs(a, steps);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->pairs[0].refused,
              HasSubstr("step 2 is { name: \"fill\" load { requests: 96000 } } in base and { "
                        "name: \"fill\" load { requests: 50000 } } in new"));

  r = CompareDirs(a, cold);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->pairs[0].refused, HasSubstr("the cache never filled in 1 of 4 new repeats"));

  CompareOptions force;
  force.force = true;
  r = CompareDirs(a, scale, force);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->Refused());
  EXPECT_TRUE(r->pairs[0].forced);
  EXPECT_THAT(CompareText(*r), HasSubstr("FORCED, not comparable: different scale"));
  EXPECT_THAT(CompareText(*r), HasSubstr("RSS after idle"));
}

TEST(CompareTest, RepeatedRunsInSubdirectoriesArePairedByScenario) {
  const std::string a = Runs("runs-a", 4, Idle({100, 101, 102, 103, 104}), true);
  const std::string b = Runs("runs-b", 16, Idle({130, 131, 132, 133}));
  auto base = LoadCompareSide(a);
  ASSERT_TRUE(base.ok()) << base.status();
  ASSERT_EQ(base->groups.size(), 1u);
  EXPECT_EQ(base->groups[0].samples.size(), 4u);  // the incomplete run left out
  ASSERT_EQ(base->notes.size(), 1u);
  EXPECT_THAT(base->notes[0], HasSubstr("run4: left out (run incomplete: step 3 failed)"));
  auto r = CompareDirs(a, b);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pairs[0].base_label, "seed, 4 workers (glibc)");
  EXPECT_EQ(r->pairs[0].new_label, "seed, 16 workers (glibc)");
  EXPECT_EQ(r->pairing, "the one group on each side");
  EXPECT_TRUE(r->pairs[0].figure[kFigRssAfterIdle].significant);
  // QPS of a run is requests over load time, as in its summary.
  EXPECT_NEAR(r->pairs[0].figure[kFigQps].base_median, 1015, 1e-6);
}

TEST(CompareTest, RunsUnderAnotherAllocatorEnvironmentPairAcrossSetups) {
  std::vector<Cell> arena2 = Idle({80, 81, 82, 83});
  for (Cell& c : arena2) c.arena_max = "2";
  const std::string a = Runs("env-a", 16, Idle({100, 101, 102, 103}));
  const std::string b = Runs("env-b", 16, arena2);
  auto r = CompareDirs(a, b);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pairs.size(), 1u);
  EXPECT_EQ(r->pairing, "by scenario x workers, across allocator setups");
  EXPECT_EQ(r->pairs[0].new_label, "seed, 16 workers (glibc, MALLOC_ARENA_MAX=2)");
  EXPECT_THAT(r->pairs[0].differences,
              ::testing::Contains(HasSubstr("allocator environment: { (none) } -> { "
                                            "MALLOC_ARENA_MAX=2 }")));
  // Both setups in one directory are two groups, each paired with its own.
  const std::string mixed = Runs("env-mixed", 16, Idle({100, 101, 102, 103}));
  Runs("env-mixed/arena2", 16, arena2);
  auto side = LoadCompareSide(mixed);
  ASSERT_TRUE(side.ok());
  EXPECT_EQ(side->groups.size(), 2u);
  r = CompareDirs(mixed, mixed);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->pairs.size(), 2u);
  EXPECT_EQ(r->pairs[1].base_label, r->pairs[1].new_label);
  EXPECT_EQ(r->pairing, "by scenario x workers");
}

std::vector<Cell> Fingerprinted(std::vector<Cell> cells, const std::string& arena_max = "",
                                int cpus = 2) {
  for (Cell& c : cells) {
    c.fingerprint = true;
    c.arena_max = arena_max;
    c.cpus = cpus;
  }
  return cells;
}

// Runs whose fingerprints differ are refused with the difference named, and
// --force does not override it: only --ignore_fingerprint, per field.
TEST(CompareTest, RunsWhoseFingerprintsDifferAreRefusedNamingTheField) {
  const std::string a = Runs("fp-a", 16, Fingerprinted(Idle({100, 101, 102, 103})));
  const std::string b = Runs("fp-b", 16, Fingerprinted(Idle({80, 81, 82, 83}), "2"));
  CompareOptions o;
  o.force = true;
  auto r = CompareDirs(a, b, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pairs.size(), 1u);
  EXPECT_TRUE(r->Refused());
  EXPECT_EQ(r->pairs[0].fingerprint_mismatch,
            "base and new differ in MALLOC_ARENA_MAX at start (unset vs 2)");
  EXPECT_EQ(r->pairs[0].fingerprint_keys, std::vector<std::string>{"MALLOC_ARENA_MAX"});
  EXPECT_THAT(CompareText(*r), HasSubstr("NOT COMPARABLE: base and new differ in"));

  o.ignore_fingerprint = {"MALLOC_ARENA_MAX"};
  r = CompareDirs(a, b, o);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->Refused());
  EXPECT_THAT(CompareText(*r),
              HasSubstr("fingerprint: glibc 2.36, glibc 2.36, 2 of 2 CPUs, cgroup CPU max, THP "
                        "madvise, start env { (none) }"));
  o.ignore_fingerprint = {"start_env"};
  r = CompareDirs(a, b, o);
  EXPECT_FALSE(r->Refused());

  // Another machine: more CPUs (glibc's arena limit is 8 x cores).
  const std::string c = Runs("fp-c", 16, Fingerprinted(Idle({100, 101, 102, 103}), "", 4));
  r = CompareDirs(a, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pairs[0].fingerprint_mismatch,
            "base and new differ in CPUs online (2 vs 4) and CPUs allowed (2 vs 4)");
  // Within one side: the repeats themselves are not comparable.
  std::vector<Cell> mixed = Fingerprinted(Idle({100, 101, 102}));
  mixed.push_back(Fingerprinted(Idle({103}), "", 4)[0]);
  const std::string m = Runs("fp-mixed", 16, mixed);
  r = CompareDirs(m, a);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->pairs[0].fingerprint_mismatch,
              HasSubstr("base repeats differ in CPUs online (2 in " + m + "/run0 vs 4 in " + m +
                        "/run3)"));
  // Runs from before fingerprints: nothing to check, and the output says so.
  const std::string old = Runs("fp-old", 16, Idle({100, 101, 102, 103}));
  r = CompareDirs(old, a);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->Refused());
  EXPECT_EQ(r->pairs[0].unfingerprinted, 4);
  EXPECT_THAT(CompareText(*r), HasSubstr("not recorded in 4 repeat(s)"));
}

TEST(CompareTest, SweepProfilesMayDifferInAllocatorSetupButNotInMachine) {
  const std::string a = Sweep("fp-sw-a", "glibc", 64, Fingerprinted(Idle({100, 101, 102, 103})));
  const std::string b =
      Sweep("fp-sw-b", "glibc-arena2", 64, Fingerprinted(Idle({80, 81, 82, 83}), "2"));
  auto r = CompareDirs(a, b);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->Refused()) << r->pairs[0].fingerprint_mismatch;
  const std::string c =
      Sweep("fp-sw-c", "glibc-arena2", 64, Fingerprinted(Idle({80, 81, 82, 83}), "2", 8));
  r = CompareDirs(a, c);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->pairs[0].fingerprint_mismatch, HasSubstr("CPUs online (2 vs 8)"));
}

// The gate's verdict on RSS after idle for base 100..103 MiB against `neu`.
GateVerdict IdleVerdict(const std::string& name, std::vector<double> base,
                        std::vector<double> neu, CompareOptions o = {}, Shift* shift = nullptr) {
  const std::string a = Sweep(name + "-a", "glibc", 64, Idle(base));
  const std::string b = Sweep(name + "-b", "glibc", 64, Idle(neu));
  o.gate = {kFigRssAfterIdle};
  auto r = CompareDirs(a, b, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return GateVerdict::kNoChange;
  const FigureResult& fr = r->pairs[0].figure[kFigRssAfterIdle];
  if (shift != nullptr) *shift = fr.shift;
  // The gate passes an improvement.
  EXPECT_EQ(r->Gate(nullptr), fr.verdict == GateVerdict::kImprovement ? GateVerdict::kNoChange
                                                                      : fr.verdict);
  return fr.verdict;
}

// Base 100..103 MiB (median 101.5): the floor is max(1 MiB, 5 % = 5.075
// MiB). At 4 vs 4 the 95 % interval of the shift is [smallest, largest
// pairwise difference] (k = 1), so new = base + d gives [d - 3, d + 3].
TEST(CompareTest, VerdictsFromTheShiftIntervalAndTheFloors) {
  Shift s;
  // +10: [7, 13], all beyond 5.075.
  EXPECT_EQ(IdleVerdict("v-reg", {100, 101, 102, 103}, {110, 111, 112, 113}, {}, &s),
            GateVerdict::kRegression);
  EXPECT_NEAR(s.shift, 10 * kMiB, 1);
  EXPECT_NEAR(s.low, 7 * kMiB, 1);
  EXPECT_NEAR(s.high, 13 * kMiB, 1);
  // -20: [-23, -17].
  EXPECT_EQ(IdleVerdict("v-imp", {100, 101, 102, 103}, {80, 81, 82, 83}),
            GateVerdict::kImprovement);
  // +1: [-2, 4], within +-5.075.
  EXPECT_EQ(IdleVerdict("v-same", {100, 101, 102, 103}, {101, 102, 103, 104}),
            GateVerdict::kNoChange);
  // +4: [1, 7] straddles the floor: significant, but maybe not material.
  EXPECT_EQ(IdleVerdict("v-straddle", {100, 101, 102, 103}, {104, 105, 106, 107}),
            GateVerdict::kCantTell);
  // Both floors are required for a regression: +10 is below a 20 % floor,
  // and below a 15 MiB one.
  CompareOptions o;
  o.floor_pct = 20;
  EXPECT_EQ(IdleVerdict("v-pct", {100, 101, 102, 103}, {110, 111, 112, 113}, o),
            GateVerdict::kNoChange);
  o.floor_pct = 1;
  o.floor_mib = 15;
  EXPECT_EQ(IdleVerdict("v-mib", {100, 101, 102, 103}, {110, 111, 112, 113}, o),
            GateVerdict::kNoChange);
}

// 3 vs 3 can never reach 95 % (the most extreme split alone has p = 0.1):
// however far apart, the verdict is "can't tell", never "no change".
TEST(CompareTest, ThreeAgainstThreeCannotTell) {
  Shift s;
  EXPECT_EQ(IdleVerdict("v-3a", {100, 101, 102}, {200, 201, 202}, {}, &s),
            GateVerdict::kCantTell);
  EXPECT_FALSE(s.has_interval);
  EXPECT_NEAR(s.shift, 100 * kMiB, 1);
  EXPECT_EQ(IdleVerdict("v-3b", {100, 101, 102}, {100, 101, 102}), GateVerdict::kCantTell);
  const std::string a = Sweep("v-3c-a", "glibc", 64, Idle({100, 101, 102}));
  CompareOptions o;
  o.gate = {kFigRssAfterIdle};
  auto r = CompareDirs(a, a, o);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(CompareText(*r), HasSubstr("+0.0 [none]  can't tell"));
  EXPECT_THAT(CompareText(*r),
              HasSubstr("gate (rss_after_idle): can't tell - glibc x 64 threads rss_after_idle: "
                        "can't tell"));
}

TEST(CompareTest, GateFiguresAreParsed) {
  auto g = ParseGateFigures("rss, vmhwm,rss_after_idle");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->size(), 6u);
  EXPECT_TRUE(ParseGateFigures("").ok());
  EXPECT_THAT(ParseGateFigures("rss_idle").status().message(),
              HasSubstr("unknown figure \"rss_idle\""));
}

TEST(CompareTest, IgnoreFingerprintKeysAreChecked) {
  EXPECT_TRUE(CheckFingerprintKey("cpus_online").ok());
  EXPECT_TRUE(CheckFingerprintKey("MALLOC_ARENA_MAX").ok());
  absl::Status s = CheckFingerprintKey("cores");
  EXPECT_THAT(s.message(), HasSubstr("unknown field \"cores\""));
  EXPECT_FALSE(CheckFingerprintKey("1ABC").ok());
  EXPECT_FALSE(CheckFingerprintKey("").ok());
}

TEST(CompareTest, NothingToPairOrMixedKindsIsOneSentence) {
  const std::string s1 = Sweep("mix-s1", "glibc", 1, Idle({100}));
  const std::string runs = Runs("mix-runs", 1, Idle({100}));
  auto r = CompareDirs(s1, runs);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("mix sweeps and single runs"));
  auto missing = LoadCompareSide(Tmp("nowhere"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no events.jsonl in it or below it"));
}

TEST(ThresholdTest, ParsesAndRejects) {
  auto t = ParseThreshold("rss_after_idle>+10%");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->figure, kFigRssAfterIdle);
  EXPECT_TRUE(t->greater);
  EXPECT_DOUBLE_EQ(t->pct, 10);
  t = ParseThreshold("qps<-2.5%");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->greater);
  EXPECT_DOUBLE_EQ(t->pct, -2.5);
  EXPECT_DOUBLE_EQ(ParseThreshold("p99_ms>20%")->pct, 20);
  EXPECT_THAT(ParseThreshold("rss_idle>+10%").status().message(),
              HasSubstr("unknown figure \"rss_idle\"; figures: rss_under_load,"));
  EXPECT_THAT(ParseThreshold("rss_after_idle=10%").status().message(), HasSubstr("no '>' or '<'"));
  EXPECT_THAT(ParseThreshold("rss_after_idle>10").status().message(),
              HasSubstr("must be a percentage ending in %"));
  EXPECT_THAT(ParseThreshold("rss_after_idle>ten%").status().message(),
              HasSubstr("\"ten%\" is not a percentage"));
  EXPECT_FALSE(ParseThreshold(">10%").ok());
  EXPECT_FALSE(ParseThreshold("rss_after_idle>%").ok());
}

// Without --plot the plot goes beside the table (`> DIR/NAME.md`), never
// into the current directory; with no such file there is none.
TEST(PlotBesideTest, BesideTheTableFileOrNowhere) {
  std::string why;
  // The file's path as the kernel names it (TEST_TMPDIR may hold a symlink).
  char real[PATH_MAX];
  ASSERT_NE(realpath(getenv("TEST_TMPDIR"), real), nullptr);
  const std::string dir = real;
  const int md = open(Tmp("differ.md").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(md, 0);
  EXPECT_EQ(PlotBeside(md, &why), dir + "/differ.png");
  close(md);
  const int bare = open(Tmp("table").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(bare, 0);
  EXPECT_EQ(PlotBeside(bare, &why), dir + "/table.png");
  close(bare);
  const int png = open(Tmp("x.png").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(png, 0);
  EXPECT_EQ(PlotBeside(png, &why), "");
  EXPECT_THAT(why, HasSubstr("itself a .png"));
  close(png);
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  EXPECT_EQ(PlotBeside(p[1], &why), "");
  EXPECT_THAT(why, HasSubstr("stdout is not a file"));
  close(p[0]);
  close(p[1]);
}

}  // namespace
}  // namespace rsslab
