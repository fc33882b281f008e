#include "loadgen/http/http_engine.h"

#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "loadgen/http/h1_worker.h"
#include "loadgen/http/h2_worker.h"
#include "loadgen/http/http_run.h"
#include "loadgen/http/worker_loop.h"
#include "loadgen/results/histogram.h"
#include "loadgen/step_counts.h"

namespace rsslab {
namespace http {
namespace {

using ::rsslab::v1::LoadSpec;

int64_t MonoNs() { return StepMonoNs(); }

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

int AllowedCpus() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0
             ? CPU_COUNT(&set)
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// n split over k parts: part i's share.
int Share(int n, int k, int i) { return n / k + (i < n % k ? 1 : 0); }

}  // namespace

HttpEngine::HttpEngine(Options options) : options_(std::move(options)) {
  // As LoadEngine: Debian's absl checks every Mutex for deadlock cycles,
  // bookkeeping a visible share of a request's CPU here; the engine's locks
  // do not nest.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}
HttpEngine::~HttpEngine() = default;

LiveProgress HttpEngine::Progress() const {
  std::shared_ptr<RunState> st;
  {
    absl::MutexLock l(&mu_);
    st = current_;
  }
  if (st == nullptr) return LiveProgress();
  return st->Progress(st->Merged());
}

rsslab::v1::Latency HttpEngine::TakeInterval() {
  std::shared_ptr<RunState> st;
  {
    absl::MutexLock l(&mu_);
    st = current_;
  }
  if (st == nullptr) return {};
  Histogram h;
  for (auto& s : st->shards) {
    absl::MutexLock l(&s->mu);
    h.Merge(s->interval);
    s->interval.Reset();
  }
  return h.LatencyMicros();
}

namespace {

// The step's figures into result->summary, and its status.
void Summarize(RunState* st, double cpu, const Sends& sends, LoadResult* result) {
  auto& sum = result->summary;
  Histogram tail;
  std::array<uint64_t, kOutcomes> outcomes = {};
  uint64_t req_bytes = 0, resp_bytes = 0;
  for (auto& sh : st->shards) {
    absl::MutexLock l(&sh->mu);
    tail.Merge(sh->interval);
    sh->interval.Reset();
    for (int o = 0; o < kOutcomes; ++o) outcomes[o] += sh->outcomes[o];
    req_bytes += sh->req_bytes;
    resp_bytes += sh->resp_bytes;
  }
  if (tail.count() > 0) result->tail_interval = tail.LatencyMicros();
  sum.set_call(st->target->describe());
  sum.set_request_bytes(req_bytes);
  sum.set_response_bytes(resp_bytes);
  for (int o = 0; o < kOutcomes; ++o) {
    if (outcomes[o] > 0) (*sum.mutable_status_counts())[OutcomeName(o)] = outcomes[o];
  }
  st->Summarize(st->Merged(), cpu, sends, "requests", result);
}

}  // namespace

LoadResult HttpEngine::Run(const LoadSpec& spec, const std::string& step, const StopFlag* stop) {
  LoadResult result;
  auto& sum = result.summary;
  sum.set_step(step);
  sum.set_mode(spec.rate() > 0 ? "open" : "closed");
  sum.set_concurrency(spec.concurrency());
  sum.set_channels(spec.channels());
  sum.set_target_rate(spec.rate());
  sum.set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  if (absl::Status s = WaitConnectable(*options_.target, options_.connect_timeout); !s.ok()) {
    result.status = s;
    sum.set_first_error(std::string(s.message()));
    sum.set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
    return result;
  }
  auto st = std::make_shared<RunState>();
  st->spec = spec;
  st->target = options_.target.get();
  st->max_errors = options_.max_errors;
  st->max_receive_mb = options_.max_receive_mb;
  st->metrics = options_.metrics;
  st->open_loop = spec.rate() > 0;
  const int conns = std::max<int>(1, spec.channels());
  const int slots = st->open_loop ? std::max<int>(1, spec.max_outstanding())
                                  : std::max<int>(1, spec.concurrency());
  int threads = options_.client_threads > 0 ? options_.client_threads
                                            : std::min(conns, AllowedCpus());
  threads = std::max(1, std::min({threads, conns, slots}));
  for (int i = 0; i < threads; ++i) st->shards.push_back(std::make_unique<Shard>());
  {
    absl::MutexLock l(&mu_);
    current_ = st;
  }
  const double cpu0 = CpuSeconds();
  const int64_t t0 = MonoNs();
  st->warmup_end_ns = t0 + static_cast<int64_t>(spec.warmup_s() * 1e9);
  if (spec.duration_s() > 0) {
    st->measure_end_ns = st->warmup_end_ns + static_cast<int64_t>(spec.duration_s() * 1e9);
  }
  std::vector<Sends> sends(threads);
  std::vector<std::thread> pool;
  // HTTP/1.1 on Beast, h2c on nghttp2: no per-request library overhead.
  const auto run_worker =
      options_.target->version() == Version::kH2c ? RunH2Worker : RunH1Worker;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      const WorkerArgs args{.index = i,
                            .threads = threads,
                            .conns = Share(conns, threads, i),
                            .slots = Share(slots, threads, i),
                            .t0 = t0};
      run_worker(st.get(), args, stop, &sends[i]);
    });
  }
  for (auto& t : pool) t.join();
  Sends all;
  for (const Sends& s : sends) {
    all.late += s.late;
    all.not_sent += s.not_sent;
    all.max_lag_ns = std::max(all.max_lag_ns, s.max_lag_ns);
    all.interrupted = all.interrupted || s.interrupted;
  }
  const double cpu = CpuSeconds() - cpu0;
  {
    absl::MutexLock l(&mu_);
    current_.reset();
  }
  Summarize(st.get(), cpu, all, &result);
  return result;
}

}  // namespace http
}  // namespace rsslab
