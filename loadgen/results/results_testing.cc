#include "loadgen/results/results_testing.h"

#include <cstdlib>

#include "loadgen/results/histogram.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;

Event Snap(const std::string& phase, int64_t rss_mib, int arenas) {
  Event e;
  e.set_loadgen_phase(phase);
  auto* s = e.mutable_snapshot();
  s->mutable_status()->set_rss_bytes(rss_mib << 20);
  s->mutable_status()->set_hwm_bytes((rss_mib + 50) << 20);
  s->mutable_status()->set_threads(20);
  s->mutable_memory_map()->set_arena_count(arenas);
  s->mutable_config()->set_threads(4);
  s->set_allocator("glibc");
  if (phase == "fill") {  // seed 000's fill: the cache full and churned
    s->mutable_cache()->set_cache_limit_bytes(int64_t{100} << 20);
    s->mutable_cache()->set_cache_bytes(int64_t{100} << 20);
    s->mutable_cache()->set_evicted_bytes(int64_t{250} << 20);
    s->mutable_cache()->set_evictions(1000);
  }
  return e;
}

}  // namespace

std::string TmpDir(const std::string& name) {
  const char* t = getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

std::vector<Event> SeedLikeRun(bool complete) {
  std::vector<Event> ev;
  Event h;
  h.mutable_header()->set_scenario_name("seed");
  h.mutable_header()->set_target("127.0.0.1:1");
  ev.push_back(h);
  Histogram hist;
  for (int i = 1; i <= 1000; ++i) hist.Record(i * 1000);
  Event l;
  l.set_loadgen_phase("fill");
  auto* ls = l.mutable_load();
  ls->set_step("fill");
  ls->set_requests_ok(1000);
  ls->set_elapsed_s(2);
  ls->set_qps(500);
  *ls->mutable_latency() = hist.LatencyMicros();
  *ls->mutable_histogram() = hist.ToProto();
  (*ls->mutable_status_counts())["OK"] = 1000;
  ev.push_back(l);
  ev.push_back(Snap("fill", 130, 3));
  ev.push_back(Snap("shrink", 120, 4));
  if (complete) {
    ev.push_back(Snap("idle", 119, 4));
    Event t;
    t.set_loadgen_phase("trim");
    t.mutable_phase()->mutable_snapshot()->mutable_status()->set_rss_bytes(int64_t{30} << 20);
    t.mutable_phase()->mutable_before()->mutable_status()->set_rss_bytes(int64_t{119} << 20);
    ev.push_back(t);
  }
  Event f;
  f.mutable_footer()->set_completed(complete);
  if (!complete) f.mutable_footer()->set_error("UNAVAILABLE: server went away");
  ev.push_back(f);
  return ev;
}

}  // namespace rsslab
