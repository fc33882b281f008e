#include "memory/trim/auto_trim.h"

#include <atomic>
#include <string>

#include "gtest/gtest.h"

namespace rsslab {
namespace {

constexpr int64_t kMiB = 1 << 20;

// Drives a policy with 200 ms ticks at a given request rate and gap.
class Driver {
 public:
  explicit Driver(AutoTrimOptions o) : policy_(o, t_) {}
  // Runs `seconds` at `rate` req/s; returns how many trims fired, each
  // followed by OnTrim (as the thread does).
  int Run(double seconds, double rate, int64_t gap, std::string* trigger = nullptr) {
    int fired = 0;
    for (double el = 0; el < seconds; el += 0.2) {
      t_ += absl::Milliseconds(200);
      requests_ += rate * 0.2;
      AutoTrimDecision d = policy_.Observe({t_, static_cast<uint64_t>(requests_), 100 * kMiB + gap,
                                            100 * kMiB});
      last_ = d;
      if (d.trim) {
        ++fired;
        if (trigger) *trigger = d.trigger;
        policy_.OnTrim(t_);
      }
    }
    return fired;
  }
  AutoTrimPolicy& policy() { return policy_; }
  absl::Time now() const { return t_; }
  const AutoTrimDecision& last() const { return last_; }

 private:
  absl::Time t_ = absl::FromUnixSeconds(1000000);
  double requests_ = 0;
  AutoTrimPolicy policy_;
  AutoTrimDecision last_;
};

AutoTrimOptions AfterBurst() {
  AutoTrimOptions o;
  o.mode = AutoTrimOptions::Mode::kAfterBurst;
  return o;
}

TEST(AutoTrimPolicy, FiresOnceAfterBurstOnceSettled) {
  Driver d(AfterBurst());
  EXPECT_EQ(d.Run(10, 2000, 200 * kMiB), 0) << "fired during steady load";
  EXPECT_FALSE(d.last().low);
  EXPECT_NEAR(d.last().rate, 2000, 50);
  // Load stops: nothing before the settle time (2 s), one trim after.
  EXPECT_EQ(d.Run(1.6, 0, 200 * kMiB), 0);
  std::string trigger;
  EXPECT_EQ(d.Run(2.0, 0, 200 * kMiB, &trigger), 1);
  EXPECT_EQ(trigger, "auto_after_burst");
  // Still idle, gap still large (the allocator kept it): no repeat.
  EXPECT_EQ(d.Run(60, 0, 200 * kMiB), 0);
  // A new burst re-arms it.
  EXPECT_EQ(d.Run(5, 2000, 200 * kMiB), 0);
  EXPECT_EQ(d.Run(4, 0, 200 * kMiB), 1);
}

TEST(AutoTrimPolicy, DropToLowRateCountsAsSettled) {
  Driver d(AfterBurst());
  d.Run(10, 2000, 200 * kMiB);
  // 5 % of the peak is "dropped" with the default fraction 0.1.
  EXPECT_EQ(d.Run(3.5, 100, 200 * kMiB), 1);
}

TEST(AutoTrimPolicy, DipShorterThanSettleDoesNotFire) {
  Driver d(AfterBurst());
  d.Run(10, 2000, 200 * kMiB);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(d.Run(1.0, 0, 200 * kMiB), 0) << "1 s pause " << i;
    EXPECT_EQ(d.Run(2.0, 2000, 200 * kMiB), 0);
  }
}

TEST(AutoTrimPolicy, SmallGapDoesNotFire) {
  Driver d(AfterBurst());
  d.Run(10, 2000, 4 * kMiB);
  EXPECT_EQ(d.Run(10, 0, 4 * kMiB), 0);
  EXPECT_EQ(d.last().gap_bytes, 4 * kMiB);
  EXPECT_TRUE(d.last().armed);
  // The gap appearing later (same idle spell) still triggers.
  EXPECT_EQ(d.Run(0.4, 0, 64 * kMiB), 1);
}

TEST(AutoTrimPolicy, MinSpacingHoldsAfterManualTrim) {
  AutoTrimOptions o = AfterBurst();
  o.min_spacing = absl::Seconds(10);
  Driver d(o);
  d.Run(5, 2000, 200 * kMiB);
  d.policy().OnTrim(d.now());  // a manual trim now
  d.Run(3, 2000, 200 * kMiB);  // re-arm
  // Settled after 2 s, but the manual trim was only ~5 s ago.
  EXPECT_EQ(d.Run(4, 0, 200 * kMiB), 0);
  EXPECT_EQ(d.Run(4, 0, 200 * kMiB), 1);
}

TEST(AutoTrimPolicy, IntervalFiresEveryIntervalWhenGapIsLarge) {
  AutoTrimOptions o;
  o.mode = AutoTrimOptions::Mode::kInterval;
  o.interval = absl::Seconds(30);
  Driver d(o);
  std::string trigger;
  EXPECT_EQ(d.Run(29, 500, 200 * kMiB), 0);
  EXPECT_EQ(d.Run(90, 500, 200 * kMiB, &trigger), 3);
  EXPECT_EQ(trigger, "auto_interval");
  EXPECT_EQ(d.Run(120, 500, 1 * kMiB), 0) << "nothing to free";
}

TEST(AutoTrimPolicy, OffNeverFires) {
  Driver d(AutoTrimOptions{});
  d.Run(10, 2000, 500 * kMiB);
  EXPECT_EQ(d.Run(60, 0, 500 * kMiB), 0);
}

// A burst that ends before the thread's first tick (a starved thread on a
// busy machine) is still seen: Start() takes a baseline sample.
TEST(AutoTrimThread, BurstBeforeTheFirstTickStillFires) {
  AutoTrimOptions o = AfterBurst();
  o.tick = absl::Milliseconds(300);
  o.settle = absl::Milliseconds(300);
  o.gap_bytes = 0;
  o.min_spacing = absl::ZeroDuration();
  std::atomic<uint64_t> requests{0};
  std::atomic<int> trims{0};
  AutoTrimThread::Hooks hooks;
  hooks.sample = [&](AutoTrimSample* s) {
    s->requests = requests.load();
    s->rss_bytes = 200 * kMiB;
    s->live_bytes = 100 * kMiB;
  };
  hooks.trim = [&](const std::string&) { trims.fetch_add(1); };
  AutoTrimThread thread(o, hooks);
  thread.Start();
  requests = 5000;  // the whole burst, before the first tick
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (trims.load() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  thread.Stop();
  EXPECT_EQ(trims.load(), 1);
}

TEST(AutoTrimOptions, ParseAndValidate) {
  EXPECT_EQ(*ParseAutoTrimMode("after_burst"), AutoTrimOptions::Mode::kAfterBurst);
  EXPECT_EQ(*ParseAutoTrimMode("interval"), AutoTrimOptions::Mode::kInterval);
  EXPECT_EQ(*ParseAutoTrimMode("off"), AutoTrimOptions::Mode::kOff);
  EXPECT_FALSE(ParseAutoTrimMode("sometimes").ok());
  EXPECT_TRUE(ValidateAutoTrimOptions(AutoTrimOptions{}).ok());
  AutoTrimOptions bad;
  bad.settle_fraction = 1.5;
  EXPECT_FALSE(ValidateAutoTrimOptions(bad).ok());
  bad = AutoTrimOptions{};
  bad.gap_bytes = -1;
  EXPECT_FALSE(ValidateAutoTrimOptions(bad).ok());
}

}  // namespace
}  // namespace rsslab
