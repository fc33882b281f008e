// exporter/fleet: the parts of a scrape that need no running service (the
// masters of forked workers, the series a scrape builds, /sd's JSON);
// //exporter:prometheus_test runs the whole under Prometheus.
#include "exporter/fleet.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/procfs/procfs.h"
#include "common/procfs/outside_snapshot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace exporter {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

registry::Entry Worker(int pid, const std::string& service = "shop") {
  registry::Entry e;
  e.pid = pid;
  e.service = service;
  e.address = "127.0.0.1:1";
  return e;
}

class ForkedChild : public ::testing::Test {
 protected:
  void SetUp() override {
    child_ = fork();
    if (child_ == 0) {
      pause();
      _exit(0);
    }
    ASSERT_GT(child_, 0);
  }
  void TearDown() override {
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
  }
  pid_t child_ = 0;
};

TEST_F(ForkedChild, TheForkingParentIsTheMaster) {
  // The child is a fork of this test: the same executable and command line.
  std::vector<Member> m = FindMasters({Worker(child_)}, registry::Trust::Self());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].entry.pid, getpid());
  EXPECT_EQ(m[0].entry.service, "shop");
  EXPECT_EQ(m[0].role, "master");
  // A parent that is registered itself is a worker, not a master.
  EXPECT_TRUE(FindMasters({Worker(child_), Worker(getpid())}, registry::Trust::Self()).empty());
  // A parent of a user not trusted is not read.
  registry::Trust other;
  other.uids = {static_cast<int>(geteuid()) + 4242};
  EXPECT_TRUE(FindMasters({Worker(child_)}, other).empty());
}

TEST_F(ForkedChild, OneScrapesSeriesPerProcessWithTheirLabels) {
  Member w;
  w.entry = Worker(child_);
  w.role = "worker";
  w.allocator_version = "2.36";
  absl::StatusOr<rsslab::v1::Snapshot> s = procfs::OutsideSnapshot(child_);
  ASSERT_TRUE(s.ok()) << s.status();
  w.proc = *s;
  w.proc_ok = true;
  w.control_ok = true;
  w.control.set_trims_total(3);
  rsslab::v1::TrimTotals* t = w.control.add_trim_totals();
  t->set_trigger("manual");
  t->set_count(3);
  t->set_longest_worker_pause_us(1500);
  w.has_regrowth = true;
  w.regrowth_bytes = 4096;
  w.regrowth_minor_faults = 7;
  w.has_burst_regrowth = true;
  w.burst_regrowth_bytes = 8192;
  w.burst_requests = 300;
  w.has_recycling = true;
  w.first_rss = 1000;
  w.recycling_limits.rss_limit_bytes = 900;
  w.recycling_limits.rss_limit_flag = "--reload-on-rss";
  w.recycling.limit_below_fresh = true;
  w.recycling.has_growth = true;
  w.recycling.growth_per_request = 2.5;
  Member master = w;
  master.entry.pid = getpid();
  master.role = "master";
  Member gone = w;
  gone.entry.pid = 999999;
  gone.proc_ok = false;  // exited since it was listed
  metrics::Exposition e;
  AppendMembers({master, w, gone}, &e);
  const std::string text = e.Text();
  const std::string lw = absl::StrCat("service=\"shop\",pid=\"", child_,
                                      "\",role=\"worker\",allocator=\"", w.proc.allocator(),
                                      "\",allocator_version=\"2.36\"");
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_process_resident_memory_bytes{", lw, "} ")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_process_resident_memory_bytes{service=\"shop\",pid=\"",
                                           getpid(), "\",role=\"master\"")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_control_up{", lw, "} 1\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trims_by_trigger_total{", lw,
                                           ",trigger=\"manual\"} 3\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trims_by_trigger_total{", lw,
                                           ",trigger=\"phase\"} 0\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trim_longest_worker_pause_seconds{", lw,
                                           ",trigger=\"manual\"} 0.0015\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trim_regrowth_bytes{", lw, "} 4096\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trim_regrowth_minor_faults{", lw, "} 7\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trim_burst_regrowth_bytes{", lw, "} 8192\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_trim_burst_requests{", lw, "} 300\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_worker_first_rss_bytes{", lw, "} 1000\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_recycle_rss_limit_bytes{", lw,
                                           ",flag=\"--reload-on-rss\"} 900\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_recycle_limit_below_fresh{", lw, "} 1\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("rsslab_worker_rss_growth_per_request_bytes{", lw,
                                           "} 2.5\n")));
  // No max_requests, no suggestion: no series rather than a 0.
  EXPECT_THAT(text, Not(HasSubstr("rsslab_recycle_max_requests{")));
  EXPECT_THAT(text, Not(HasSubstr("rsslab_recycle_suggested_max_requests{")));
  // The master has no Control; the exited one no series at all.
  EXPECT_THAT(text, Not(HasSubstr(absl::StrCat("rsslab_control_up{service=\"shop\",pid=\"", getpid()))));
  EXPECT_THAT(text, Not(HasSubstr("pid=\"999999\"")));
  // One HELP per family, however many processes.
  EXPECT_EQ(text.find("# HELP rsslab_process_threads"),
            text.rfind("# HELP rsslab_process_threads"));
}

// smaps is most of a scrape's cost: a process's classified map is read at
// most once per interval, its status (RSS) every scrape.
TEST_F(ForkedChild, TheMapIsReadOncePerIntervalTheStatusEveryScrape) {
  Member w;
  w.entry = Worker(child_);
  w.role = "worker";
  std::vector<Member> members = {w};
  ProcReads reads;
  const absl::Time t0 = absl::Now();
  ReadProcs(&members, t0, absl::Seconds(60), &reads);
  ASSERT_TRUE(members[0].proc_ok);
  ASSERT_EQ(reads.size(), 1u);
  // Marks on the kept read: a re-read would overwrite both.
  reads.begin()->second.snapshot.mutable_memory_map()->set_arena_count(4242);
  reads.begin()->second.snapshot.mutable_status()->set_rss_bytes(1);
  members = {w};
  ReadProcs(&members, t0 + absl::Seconds(59), absl::Seconds(60), &reads);
  EXPECT_EQ(members[0].proc.memory_map().arena_count(), 4242);  // the kept map
  EXPECT_GT(members[0].proc.status().rss_bytes(), 4096);        // a fresh status
  members = {w};
  ReadProcs(&members, t0 + absl::Seconds(61), absl::Seconds(60), &reads);
  EXPECT_NE(members[0].proc.memory_map().arena_count(), 4242);  // read again
  reads.begin()->second.snapshot.mutable_memory_map()->set_arena_count(4242);
  members = {w};
  ReadProcs(&members, t0 + absl::Seconds(62), absl::ZeroDuration(), &reads);
  EXPECT_NE(members[0].proc.memory_map().arena_count(), 4242);  // 0s: every scrape
  // A process gone is dropped from the reads.
  Member gone = w;
  gone.entry.pid = 999999;
  members = {gone};
  ReadProcs(&members, t0 + absl::Seconds(63), absl::Seconds(60), &reads);
  EXPECT_FALSE(members[0].proc_ok);
  EXPECT_TRUE(reads.empty());
}

TEST(LimitsOfTest, ARetitledWorkerReadsItsParentsCommandLine) {
  // A parent whose command line has --max-requests 77, its child retitled
  // (exec -a, as setproctitle does) with no flags of its own.
  FILE* p = popen("exec /bin/bash -c '(exec -a \"worker: retitled\" sleep 30) & echo $!; wait' "
                  "--max-requests 77", "r");
  ASSERT_NE(p, nullptr);
  int child = 0;
  ASSERT_EQ(fscanf(p, "%d", &child), 1);
  absl::StatusOr<std::string> cmd;
  for (int i = 0; i < 100; ++i) {  // until the exec has happened
    cmd = procfs::ReadProcFile(child, "cmdline");
    if (cmd.ok() && absl::StartsWith(*cmd, "worker: retitled")) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  const RecyclingLimits l = LimitsOf(child, registry::Trust::Self());
  registry::Trust other;
  other.uids = {static_cast<int>(geteuid()) + 4242};
  const RecyclingLimits untrusted = LimitsOf(child, other);
  kill(child, SIGKILL);
  pclose(p);
  EXPECT_EQ(l.max_requests, 77);
  EXPECT_EQ(l.max_requests_flag, "--max-requests");
  EXPECT_EQ(untrusted.max_requests, 0);  // a parent of a user not trusted is not read
}

TEST(RegrowthTest, TheMinuteAfterATrimIsFollowedThenKept) {
  const absl::Time trim = absl::FromUnixSeconds(1000);
  rsslab::v1::TrimResult t;
  t.set_unix_nanos(absl::ToUnixNanos(trim));
  t.set_rss_after_bytes(100);
  Regrowth r;
  UpdateRegrowth(t, 120, 50, 0, trim + absl::Seconds(1), &r);  // the first scrape after it
  EXPECT_EQ(r.max_rss - r.rss_after, 20);
  EXPECT_EQ(r.faults_last - r.faults_start, 0u);
  UpdateRegrowth(t, 180, 90, 0, trim + absl::Seconds(30), &r);
  UpdateRegrowth(t, 150, 95, 0, trim + absl::Seconds(59), &r);
  EXPECT_EQ(r.max_rss - r.rss_after, 80);  // the highest seen
  EXPECT_EQ(r.faults_last - r.faults_start, 45u);
  UpdateRegrowth(t, 500, 900, 0, trim + absl::Seconds(90), &r);  // past the minute: kept
  EXPECT_EQ(r.max_rss - r.rss_after, 80);
  EXPECT_EQ(r.faults_last - r.faults_start, 45u);
  // The next trim starts over.
  t.set_unix_nanos(absl::ToUnixNanos(trim + absl::Seconds(100)));
  t.set_rss_after_bytes(300);
  UpdateRegrowth(t, 310, 1000, 0, trim + absl::Seconds(101), &r);
  EXPECT_EQ(r.max_rss - r.rss_after, 10);
  EXPECT_EQ(r.faults_last - r.faults_start, 0u);
}

TEST(RegrowthTest, TheNextBurstByTheRequestCount) {
  const absl::Time trim = absl::FromUnixSeconds(1000);
  rsslab::v1::TrimResult t;
  t.set_unix_nanos(absl::ToUnixNanos(trim));
  t.set_rss_after_bytes(100);
  Regrowth r;
  const auto at = [&](int s) { return trim + absl::Seconds(s); };
  UpdateRegrowth(t, 105, 10, 500, at(15), &r);  // the first scrape after it: the count's base
  UpdateRegrowth(t, 104, 12, 500, at(30), &r);  // quiet: no burst yet
  EXPECT_FALSE(r.burst_started);
  UpdateRegrowth(t, 160, 40, 700, at(120), &r);  // a burst (past the minute: only it counts)
  UpdateRegrowth(t, 190, 70, 900, at(135), &r);  // still rising
  EXPECT_TRUE(r.burst_started);
  EXPECT_FALSE(r.burst_done);
  UpdateRegrowth(t, 170, 75, 900, at(150), &r);  // quiet: the burst is over
  ASSERT_TRUE(r.burst_done);
  EXPECT_EQ(r.burst_max_rss - r.rss_after, 90);  // the highest RSS up to its end
  EXPECT_EQ(r.burst_faults, 65u);                 // from the first scrape to its end
  EXPECT_EQ(r.burst_requests, 400u);
  EXPECT_EQ(r.max_rss - r.rss_after, 5);  // the minute's figure is its own
  UpdateRegrowth(t, 400, 500, 2000, at(165), &r);  // later bursts: kept
  EXPECT_EQ(r.burst_max_rss - r.rss_after, 90);
  EXPECT_EQ(r.burst_requests, 400u);
}

TEST(ServiceDiscoveryTest, WorkersWithAMetricsAddressOnlyEscaped) {
  Member a, b, c;
  a.role = b.role = "worker";
  c.role = "master";
  a.entry = Worker(10);
  a.entry.metrics_address = "127.0.0.1:9464";
  b.entry = Worker(11);  // no metrics=
  c.entry = Worker(12);
  c.entry.metrics_address = "127.0.0.1:1";
  Member d = a;
  d.entry.pid = 13;
  d.entry.metrics_address = "h\"x\\:1";  // a hostile entry's text stays a JSON string
  EXPECT_EQ(ServiceDiscoveryJson({a, b, c, d}),
            "[{\"targets\":[\"127.0.0.1:9464\"],\"labels\":{\"service\":\"shop\",\"pid\":\"10\"}},"
            "{\"targets\":[\"h\\\"x\\\\:1\"],\"labels\":{\"service\":\"shop\",\"pid\":\"13\"}}]\n");
  EXPECT_EQ(ServiceDiscoveryJson({}), "[]\n");
}

}  // namespace
}  // namespace exporter
}  // namespace rsslab
