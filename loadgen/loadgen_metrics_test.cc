#include "loadgen/loadgen_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LoadgenMetricsTest, CountsMeasuredRequestsByCodeAndKeepsWarmupApart) {
  LoadgenMetrics m;
  for (int i = 0; i < 5; ++i) m.OnSend();
  m.OnDone(0, absl::Microseconds(300), /*warmup=*/false);
  m.OnDone(0, absl::Milliseconds(3), false);
  m.OnDone(14, absl::Milliseconds(20), false);  // UNAVAILABLE
  m.OnDone(0, absl::Microseconds(50), /*warmup=*/true);
  const std::string t = m.Text();
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_requests_total{code=\"OK\"} 2\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_requests_total{code=\"UNAVAILABLE\"} 1\n"));
  EXPECT_THAT(t, Not(HasSubstr("code=\"INTERNAL\"")));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_errors_total 1\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_warmup_requests_total 1\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_requests_in_flight 1\n"));
  // Cumulative buckets: 300 us is under 0.0005, all three under 0.025.
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_request_latency_seconds_bucket{le=\"0.00025\"} 0\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_request_latency_seconds_bucket{le=\"0.0005\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_request_latency_seconds_bucket{le=\"0.025\"} 3\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_request_latency_seconds_count 3\n"));
  // No snapshot seen yet: no RSS gauge (rather than a false 0).
  EXPECT_THAT(t, Not(HasSubstr("rsslab_loadgen_server_resident_memory_bytes")));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_run_finished 0\n"));
}

TEST(LoadgenMetricsTest, StepCycleAndLastServerRss) {
  LoadgenMetrics m;
  m.StepStarted("1/2", "fill", "load", 0);
  m.StepEnded(true);
  m.StepStarted("2/2 cycle 4: 1/3", "shrink \"x\"", "load", 3);
  rsslab::v1::Snapshot s;
  s.mutable_status()->set_rss_bytes(1000);
  m.ServerSnapshot(s);
  s.mutable_status()->set_rss_bytes(2000);
  s.mutable_status()->set_threads(19);
  m.ServerSnapshot(s);
  m.StepEnded(false);
  m.RunEnded(false);
  const std::string t = m.Text();
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_step 2\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_step_info{label=\"2/2 cycle 4: 1/3\",step=\"shrink "
                           "\\\"x\\\"\",kind=\"load\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_cycle 3\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_steps_total{result=\"ok\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_steps_total{result=\"failed\"} 1\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_server_resident_memory_bytes 2000\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_server_threads 19\n"));
  EXPECT_THAT(t, HasSubstr("rsslab_loadgen_run_finished 2\n"));
}

}  // namespace
}  // namespace rsslab
