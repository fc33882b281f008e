#include "ctl/inspect_cli.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/untrusted_text.h"
#include "common/growth/growth.h"
#include "common/metrics/exposition.h"
#include "common/metrics/http_server.h"
#include "common/metrics/process_gauges.h"
#include "ctl/inspect_rules.h"
#include "ctl/snapshot_text.h"

namespace rsslab {
namespace {

// The message may name the process by its comm ("pid N (NAME) is a
// zombie"), which the process chose: escaped.
int Fail(const absl::Status& s) {
  fprintf(stderr, "rsslab_ctl: inspect: %s\n", Echo(s.message(), 1024).c_str());
  return 2;
}

// What the exporter serves: the latest sample, replaced by the watch loop.
class Latest {
 public:
  void Set(const rsslab::v1::InspectReport& r, const rsslab::v1::ProcStatus& st,
           const rsslab::v1::MemoryMap& mm, const rsslab::v1::InspectSample& s) {
    absl::MutexLock l(&mu_);
    report_ = r;
    status_ = st;
    map_ = mm;
    sample_ = s;
  }
  std::string Render() {
    absl::MutexLock l(&mu_);
    return RenderInspectMetrics(report_, status_, map_, sample_);
  }

 private:
  absl::Mutex mu_;
  rsslab::v1::InspectReport report_ ABSL_GUARDED_BY(mu_);
  rsslab::v1::ProcStatus status_ ABSL_GUARDED_BY(mu_);
  rsslab::v1::MemoryMap map_ ABSL_GUARDED_BY(mu_);
  rsslab::v1::InspectSample sample_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string RenderInspectMetrics(const rsslab::v1::InspectReport& r,
                                 const rsslab::v1::ProcStatus& st,
                                 const rsslab::v1::MemoryMap& mm,
                                 const rsslab::v1::InspectSample& s) {
  metrics::Exposition e;
  // The server's names and meanings, for any pid.
  metrics::ProcessGauges(st, mm, r.allocator(), r.allocator_library(), &e);
  // Only inspect has these.
  e.Gauge("rsslab_inspect_target_info", "The process inspected.", int64_t{1},
          {{"pid", std::to_string(r.pid())}, {"comm", r.comm()}, {"python", r.python_version()}});
  e.Gauge("rsslab_inspect_rss_growth_bytes_per_hour",
          "Least-squares slope of VmRSS over the watch samples.", s.rss_bytes_per_hour());
  e.Gauge("rsslab_inspect_threads_growth_per_hour",
          "Least-squares slope of the thread count over the watch samples.", s.threads_per_hour());
  e.Gauge("rsslab_inspect_arenas_growth_per_hour",
          "Least-squares slope of the glibc arena count over the watch samples.",
          s.arenas_per_hour());
  e.Gauge("rsslab_inspect_samples", "Watch samples taken so far.",
          static_cast<int64_t>(s.sample() + 1));
  for (const auto& f : r.findings()) {
    e.Gauge("rsslab_inspect_finding", "1 per finding of the diagnosis (at the start of the watch).",
            int64_t{1}, {{"rule", f.rule()}, {"severity", f.severity()}});
  }
  return e.Text();
}

int RunInspect(const InspectCliOptions& o) {
  absl::StatusOr<rsslab::v1::InspectReport> report = BuildInspectReport(o.pid, o.report);
  if (!report.ok()) return Fail(report.status());
  Diagnose(&*report);

  std::unique_ptr<metrics::MetricsHttpServer> exporter;
  Latest latest;
  if (!o.metrics_listen.empty()) {
    auto started = metrics::MetricsHttpServer::Start(metrics::DefaultToLoopback(o.metrics_listen),
                                                     [&latest] { return latest.Render(); });
    if (!started.ok()) return Fail(started.status());
    exporter = std::move(*started);
    // The bound address, for a port of 0; on stderr with --json, so that
    // stdout stays one JSON object per line.
    FILE* to = o.json ? stderr : stdout;
    fprintf(to, "rsslab_ctl inspect ready metrics=%s pid=%d\n", exporter->address().c_str(), o.pid);
    fflush(to);
  }
  if (o.json) {
    PrintJsonLine(*report);
  } else {
    printf("%s", InspectText(*report).c_str());
    fflush(stdout);
  }
  if (o.watch <= absl::ZeroDuration()) return 0;

  if (!o.json) printf("watch every %s (growth per hour: least squares over the samples)\n",
                      absl::FormatDuration(o.watch).c_str());
  std::vector<GrowthPoint> points;
  const absl::Time start = absl::Now();
  absl::Time next = start;
  for (int i = 0; o.count == 0 || i < o.count; ++i) {
    absl::SleepFor(next - absl::Now());
    next += o.watch;
    rsslab::v1::ProcStatus st;
    rsslab::v1::MemoryMap mm;
    absl::StatusOr<rsslab::v1::InspectSample> s = TakeInspectSample(o.pid, &st, &mm);
    if (!s.ok()) {
      fprintf(stderr, "rsslab_ctl: inspect: after %d samples: %s\n", i,
              Echo(s.status().message(), 1024).c_str());
      return 2;
    }
    s->set_sample(i);
    s->set_elapsed_s(absl::ToDoubleSeconds(absl::FromUnixNanos(s->unix_nanos()) - start));
    points.push_back({s->unix_nanos(), s->rss_bytes(), s->threads(), s->arenas()});
    // Points are few (one per interval) but a watch may run for days: keep
    // the slope over the last 10,000 samples, bounded memory.
    if (points.size() > 10000) points.erase(points.begin());
    const GrowthRate g = GrowthPerHour(points);
    s->set_rss_bytes_per_hour(g.rss_bytes_per_hour);
    s->set_threads_per_hour(g.threads_per_hour);
    s->set_arenas_per_hour(g.arenas_per_hour);
    std::vector<GrowthStep> steps = ComputeGrowth(o.growth_threshold_mb, points);
    const GrowthStep& last = steps.back();
    s->set_rss_change_bytes(last.growth_prev);
    s->set_thread_change(last.thread_change);
    s->set_arena_change(last.arena_change);
    s->set_flagged(last.flagged);
    s->set_flag_reason(last.flag_reason);
    latest.Set(*report, st, mm, *s);
    if (o.json) {
      PrintJsonLine(*s);
    } else {
      printf("%s", InspectSampleLine(*s).c_str());
      fflush(stdout);
    }
  }
  return 0;
}

}  // namespace rsslab
