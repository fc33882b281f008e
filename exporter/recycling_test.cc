// exporter/recycling: the limits on gunicorn's, uWSGI's and Celery's
// command lines, and the advice's formula (docs/METRICS.md, "Recycling
// advice").
#include "exporter/recycling.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace exporter {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// /proc/PID/cmdline's form: arguments ended by NUL.
std::string Cmdline(std::initializer_list<const char*> args) {
  std::string out;
  for (const char* a : args) {
    out += a;
    out.push_back('\0');
  }
  return out;
}

TEST(ParseRecyclingLimitsTest, Gunicorn) {
  RecyclingLimits l = ParseRecyclingLimits(Cmdline(
      {"/usr/bin/python3", "-m", "gunicorn", "--max-requests", "1000",
       "--max-requests-jitter=50", "-w", "4", "app:app"}));
  EXPECT_EQ(l.max_requests, 1000);
  EXPECT_EQ(l.max_requests_flag, "--max-requests");
  EXPECT_EQ(l.max_requests_jitter, 50);
  EXPECT_EQ(l.rss_limit_bytes, 0);
  EXPECT_TRUE(l.errors.empty());
}

TEST(ParseRecyclingLimitsTest, UwsgiInMiBCeleryInKiB) {
  RecyclingLimits u = ParseRecyclingLimits(
      Cmdline({"uwsgi", "--master", "--reload-on-rss=200", "--max-requests", "5000"}));
  EXPECT_EQ(u.rss_limit_bytes, int64_t{200} << 20);
  EXPECT_EQ(u.rss_limit_flag, "--reload-on-rss");
  EXPECT_EQ(u.max_requests, 5000);
  RecyclingLimits c = ParseRecyclingLimits(Cmdline(
      {"celery", "-A", "proj", "worker", "--max-memory-per-child", "12000",
       "--max-tasks-per-child=100"}));
  EXPECT_EQ(c.rss_limit_bytes, int64_t{12000} * 1024);
  EXPECT_EQ(c.rss_limit_flag, "--max-memory-per-child");
  EXPECT_EQ(c.max_requests, 100);
  EXPECT_EQ(c.max_requests_flag, "--max-tasks-per-child");
}

TEST(ParseRecyclingLimitsTest, ZeroIsOffBadValuesAreNamed) {
  RecyclingLimits z = ParseRecyclingLimits(Cmdline({"gunicorn", "--max-requests", "0"}));
  EXPECT_EQ(z.max_requests, 0);
  EXPECT_EQ(z.max_requests_flag, "");
  RecyclingLimits b = ParseRecyclingLimits(Cmdline(
      {"uwsgi", "--reload-on-rss", "lots", "--max-requests=-3", "--max-requests-jitter",
       "99999999999999", "--max-tasks-per-child"}));
  EXPECT_EQ(b.rss_limit_bytes, 0);
  EXPECT_EQ(b.max_requests, 0);
  EXPECT_EQ(b.max_requests_jitter, 0);
  EXPECT_THAT(b.errors,
              ElementsAre("--reload-on-rss: 'lots' is not a whole number from 0 to 2^40",
                          "--max-requests: '-3' is not a whole number from 0 to 2^40",
                          "--max-requests-jitter: '99999999999999' is not a whole number from 0 "
                          "to 2^40",
                          "--max-tasks-per-child: no value"));
  // Flags it does not know, and look-alikes, are not read.
  RecyclingLimits n =
      ParseRecyclingLimits(Cmdline({"x", "--max-requestsX=4", "max-requests", "7"}));
  EXPECT_EQ(n.max_requests, 0);
  EXPECT_TRUE(n.errors.empty());
  EXPECT_EQ(ParseRecyclingLimits("").max_requests, 0);
}

TEST(AdviseTest, GrowthAndTheSuggestions) {
  RecyclingLimits l;
  l.max_requests = 1000;
  l.max_requests_jitter = 100;
  // 40 MiB at the first scrape (10 requests served), 60 MiB at the highest
  // since, 2010 served now:
  // 20 MiB over 2000 requests = 10,485.76 bytes per request.
  const RetentionSample s{40 << 20, 10, 60 << 20, 2010};
  RecyclingAdvice a = Advise(l, s, /*budget_bytes=*/int64_t{140} << 20);
  ASSERT_TRUE(a.has_growth);
  EXPECT_DOUBLE_EQ(a.growth_per_request, 10485.76);
  // No RSS limit: the budget; (140 - 40) MiB / 10,485.76 = 10,000 requests.
  ASSERT_TRUE(a.has_suggested_max_requests);
  EXPECT_EQ(a.suggested_max_requests, 10000);
  // 40 MiB + 10,485.76 x 1,100 = 51 MiB.
  ASSERT_TRUE(a.has_suggested_rss_limit);
  EXPECT_EQ(a.suggested_rss_limit_bytes, (int64_t{40} << 20) + 11534336);
  EXPECT_FALSE(a.limit_below_fresh);

  // An RSS limit configured is the budget: (100 - 40) MiB -> 6,000 requests.
  l.rss_limit_bytes = int64_t{100} << 20;
  EXPECT_EQ(Advise(l, s, int64_t{140} << 20).suggested_max_requests, 6000);
}

TEST(AdviseTest, ALimitBelowAFreshWorkerLoops) {
  RecyclingLimits l;
  l.rss_limit_bytes = int64_t{30} << 20;  // uWSGI --reload-on-rss=30
  RecyclingAdvice a = Advise(l, {int64_t{40} << 20, 0, int64_t{41} << 20, 5}, -1);
  EXPECT_TRUE(a.limit_below_fresh);
  EXPECT_FALSE(a.has_growth);  // 5 requests: too few for a rate
  EXPECT_FALSE(a.has_suggested_max_requests);
  l.rss_limit_bytes = int64_t{50} << 20;
  EXPECT_FALSE(Advise(l, {int64_t{40} << 20, 0, int64_t{41} << 20, 5}, -1).limit_below_fresh);
}

TEST(AdviseTest, NoGrowthNoBudgetNoSuggestion) {
  RecyclingLimits l;
  // RSS fell: growth 0, nothing to recycle for.
  RecyclingAdvice a = Advise(l, {int64_t{50} << 20, 0, int64_t{45} << 20, 500}, int64_t{1} << 30);
  ASSERT_TRUE(a.has_growth);
  EXPECT_EQ(a.growth_per_request, 0);
  EXPECT_FALSE(a.has_suggested_max_requests);
  EXPECT_FALSE(a.has_suggested_rss_limit);  // no max_requests
  // Growth but no limit and no budget.
  EXPECT_FALSE(Advise(l, {int64_t{40} << 20, 0, int64_t{50} << 20, 500}, -1)
                   .has_suggested_max_requests);
  // A counter that went back (a restarted count): no rate.
  EXPECT_FALSE(Advise(l, {int64_t{40} << 20, 900, int64_t{50} << 20, 500}, -1).has_growth);
  // A tiny growth is capped at 10^9 requests.
  RecyclingAdvice tiny = Advise(l, {int64_t{40} << 20, 0, (int64_t{40} << 20) + 1, 1000000},
                                int64_t{1} << 40);
  EXPECT_EQ(tiny.suggested_max_requests, 1000000000);
  // The largest limits and growth: capped at 2^62 bytes, no overflow.
  l.max_requests = int64_t{1} << 40;
  l.max_requests_jitter = int64_t{1} << 40;
  RecyclingAdvice huge = Advise(l, {0, 0, int64_t{1} << 50, 100}, -1);
  EXPECT_EQ(huge.suggested_rss_limit_bytes, int64_t{1} << 62);
}

}  // namespace
}  // namespace exporter
}  // namespace rsslab
