#include "loadgen/engine.h"

#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "loadgen/engine_state.h"
#include "loadgen/receive_bound.h"
#include "proto/load.grpc.pb.h"

namespace rsslab {
namespace {

using ::rsslab::v1::HandleRequest;
using ::rsslab::v1::HandleResponse;
using ::rsslab::v1::LoadSpec;

constexpr int kCodes = kStatusCodes;

using engine_internal::MonoNs;
using engine_internal::SummarizeMessages;

void SleepUntilMono(int64_t ns) {
  timespec ts;
  ts.tv_sec = ns / 1000000000;
  ts.tv_nsec = ns % 1000000000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) ==
         EINTR) {
  }
}

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

}  // namespace

LoadEngine::LoadEngine(Options options) : options_(std::move(options)) {
  // gRPC 1.51's callback API runs completions on a process-wide "nexting"
  // thread that does not survive a full grpc_shutdown / grpc_init cycle
  // (seen as aborts in grpc_cq_internal_unref when every channel of one
  // step is gone before the next step's are made). Keep the library
  // initialised for the life of the process.
  static const bool kGrpcKeptAlive = [] {
    // Debian's absl is built with Mutex deadlock detection on, and gRPC
    // 1.51's own locks are absl::Mutex: the cycle bookkeeping
    // (GraphCycles::GetId & co.) was ~8% of the loadgen's CPU in a perf
    // profile of a no-op closed-loop run. The engine's locking is simple
    // (no nesting), so the check buys nothing here.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    grpc_init();
    // The callback API's completion queue (and its "nexting" threads) is
    // shared by every channel and torn down when the last channel using it
    // goes, which happens between two steps; in gRPC 1.51 that teardown
    // raced with the threads (double free in grpc_cq_internal_unref, or
    // "ref_counted.h:183 prior > 0", about 1 run in 10). One channel that
    // has used it lives as long as the process, so it is never torn down.
    static auto* keep = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
    static auto* stub = rsslab::v1::Load::NewStub(*keep).release();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(1));
    HandleRequest req;
    HandleResponse resp;
    absl::Notification done;
    stub->async()->Handle(&ctx, &req, &resp, [&done](grpc::Status) { done.Notify(); });
    done.WaitForNotification();  // fails at once: nothing listens on port 1
    return true;
  }();
  (void)kGrpcKeptAlive;
}
LoadEngine::~LoadEngine() = default;

LiveProgress LoadEngine::Progress() const {
  std::shared_ptr<RunState> st;
  {
    absl::MutexLock l(&mu_);
    st = current_;
  }
  if (st == nullptr) return LiveProgress();
  return st->Progress(st->Merged());
}

rsslab::v1::Latency LoadEngine::TakeInterval() {
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

using RunState = LoadEngine::RunState;

// A run's state: its channels (each its own connection), stubs, histogram
// shards and, for completion queues, the poller threads, already polling.
std::shared_ptr<RunState> NewRunState(const LoadSpec& spec, const LoadEngine::Options& options) {
  auto st = std::make_shared<RunState>();
  st->spec = spec;
  st->max_errors = options.max_errors;
  st->max_receive_mb = options.max_receive_mb;
  st->metrics = options.metrics;
  st->metadata = &options.metadata;
  if (options.calls != nullptr) st->source = options.calls->Find(spec);
  st->open_loop = spec.rate() > 0;
  st->streaming = st->source != nullptr && st->source->streaming();
  st->stream_interval_ns = static_cast<int64_t>(spec.stream_interval_ms() * 1e6);
  // Closed loop only: an open-loop completion frees its slot, and freeing a
  // call's context from inside its own callback is not something gRPC 1.51
  // promises to survive.
  st->callback_api = options.callback_api && !st->open_loop;
  st->payload.assign(spec.payload_bytes(), 'x');
  if (!st->payload.empty()) st->request_template.set_payload(st->payload);
  *st->request_template.mutable_params() = spec.params();
  st->request_template.set_return_body(spec.return_body());
  const int nch = std::max<int>(1, spec.channels());
  for (int i = 0; i < nch; ++i) {
    grpc::ChannelArguments args;
    // A distinct argument per channel and a local subchannel pool: without
    // them gRPC would share one TCP connection among "separate" channels.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("rsslab.channel_index", i);
    // A reply over the bound fails its call alone (RESOURCE_EXHAUSTED), and
    // what gRPC holds for replies being assembled stays under a quota.
    BoundReceive(&args, options.max_receive_mb);
    // No transparent retries: the engine counts every failure itself, and
    // the retry filter adds per-call work (buffering each batch) for nothing
    // (callgrind: 56k -> 48k user instructions per no-op RPC). The client
    // deadline filter stays: every RPC must end by its deadline, which the
    // drain on stop relies on (GRPC_ARG_MINIMAL_STACK would drop it).
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    st->channels.push_back(
        options.security != nullptr
            ? options.security->Channel(options.target, args)
            : grpc::CreateCustomChannel(options.target, grpc::InsecureChannelCredentials(),
                                        args));
    st->stubs.push_back(rsslab::v1::Load::NewStub(st->channels.back()));
    if (st->source != nullptr) {
      st->gstubs.push_back(std::make_unique<grpc::GenericStub>(st->channels.back()));
    }
    st->shards.push_back(std::make_unique<RunState::Shard>());
  }
  // A few completion-queue threads serve every channel: no thread per RPC.
  int npoll = options.client_threads;
  if (npoll <= 0) {
    cpu_set_t set;
    const int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                         ? CPU_COUNT(&set)
                         : static_cast<int>(std::thread::hardware_concurrency());
    npoll = std::max(4, 2 * cpus);
  }
  npoll = std::max(1, std::min(nch, npoll));
  // gRPC's threads run the completions.
  if (st->callback_api || st->streaming) npoll = 0;
  for (int i = 0; i < npoll; ++i) {
    st->cqs.push_back(std::make_unique<grpc::CompletionQueue>());
  }
  for (int i = 0; i < npoll; ++i) {
    st->pollers.emplace_back([s = st.get(), cq = st->cqs[i].get()] { s->Poll(cq); });
  }
  return st;
}

// Open loop: requests leave on the schedule from `t0` whatever the server
// does, until the step's end, the engine stopping or `stop`.
void SendOpenLoop(RunState* st, int64_t t0, absl::Duration late_tolerance,
                  const StopFlag* stop, Sends* sends) {
  const LoadSpec& spec = st->spec;
  const int nch = std::max<int>(1, spec.channels());
  std::mt19937_64 rng(spec.seed());
  std::exponential_distribution<double> gap(spec.rate());
  const bool poisson = spec.arrival() == "poisson";
  const int64_t late_ns = absl::ToInt64Nanoseconds(late_tolerance);
  double offset_s = 0;
  for (uint64_t i = 0;; ++i) {
    // Constant arrivals: i / rate from t0 (no accumulated drift).
    offset_s = poisson ? offset_s + gap(rng) : i / spec.rate();
    const int64_t intended = t0 + static_cast<int64_t>(offset_s * 1e9);
    if (intended >= st->measure_end_ns || st->stopping.load()) break;
    // Sleep in slices so a stop request is seen promptly.
    while (MonoNs() < intended) {
      if (stop != nullptr && stop->stopped()) break;
      SleepUntilMono(std::min(intended, MonoNs() + 50000000));
    }
    if (stop != nullptr && stop->stopped()) {
      sends->interrupted = true;
      st->stopping = true;
      break;
    }
    // The in-flight cap: waiting here makes the send late, which is
    // counted; its latency still runs from `intended`.
    while (st->in_flight.load() >= static_cast<int64_t>(spec.max_outstanding()) &&
           !st->stopping.load() && !(stop != nullptr && stop->stopped())) {
      absl::SleepFor(absl::Microseconds(100));
    }
    // The step's time is up: what is still due is not sent (counted), so
    // an open loop ends at its duration whatever the rate (a rate
    // the client cannot reach used to send rate x duration however long
    // that took).
    if (MonoNs() >= st->measure_end_ns) {
      const double left_s = (st->measure_end_ns - intended) / 1e9;
      const double due = poisson ? 1 + left_s * spec.rate()
                                 : std::ceil((st->measure_end_ns - t0) / 1e9 * spec.rate()) - i;
      sends->not_sent = due > 0 ? static_cast<uint64_t>(std::llround(due)) : 0;
      break;
    }
    const int64_t lag = MonoNs() - intended;
    if (lag > late_ns) ++sends->late;
    sends->max_lag_ns = std::max(sends->max_lag_ns, lag);
    if (!st->Issue(nullptr, static_cast<int>(i % nch), intended)) break;
  }
}

// The step's figures, from a drained run, into result->summary; the
// status when the step failed (too many errors, interrupted, short).
void Summarize(RunState* st, double cpu, const Sends& sends, LoadResult* result) {
  auto& sum = result->summary;
  {
    Histogram tail;
    for (auto& sh : st->shards) {
      absl::MutexLock l(&sh->mu);
      tail.Merge(sh->interval);
      sh->interval.Reset();
    }
    if (tail.count() > 0) result->tail_interval = tail.LatencyMicros();
  }
  std::array<uint64_t, kCodes> codes = {};
  uint64_t req_bytes = 0, resp_bytes = 0;
  for (auto& s : st->shards) {
    absl::MutexLock l(&s->mu);
    for (int c = 0; c < kCodes; ++c) codes[c] += s->codes[c];
    req_bytes += s->req_bytes;
    resp_bytes += s->resp_bytes;
  }
  if (st->source != nullptr) {
    sum.set_call(st->source->call());
    sum.set_request_bytes(req_bytes);
    sum.set_response_bytes(resp_bytes);
  }
  if (st->streaming) SummarizeMessages(st, &sum);
  for (int c = 0; c < kCodes; ++c) {
    if (codes[c] > 0) (*sum.mutable_status_counts())[StatusCodeName(c)] = codes[c];
  }
  st->Summarize(st->Merged(), cpu, sends, "RPCs", result);
}

}  // namespace

LoadResult LoadEngine::Run(const LoadSpec& spec, const std::string& step,
                           const StopFlag* stop) {
  LoadResult result;
  auto& sum = result.summary;
  sum.set_step(step);
  sum.set_mode(spec.rate() > 0 ? "open" : "closed");
  sum.set_concurrency(spec.concurrency());
  sum.set_channels(spec.channels());
  sum.set_target_rate(spec.rate());
  sum.set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  if (!spec.call().empty() &&
      (options_.calls == nullptr || options_.calls->Find(spec) == nullptr)) {
    // The loadgen compiles every step's call before the run (a usage error
    // there); reaching this is a caller's bug, not a user's.
    result.status = absl::InternalError(
        absl::StrCat("call ", spec.call(), " was not compiled before the run"));
    sum.set_first_error(std::string(result.status.message()));
    return result;
  }

  std::shared_ptr<RunState> st = NewRunState(spec, options_);
  // Connect first, so connection set-up is not in the measurements.
  const auto connect_deadline =
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.connect_timeout));
  for (auto& ch : st->channels) {
    if (!ch->WaitForConnected(connect_deadline)) {
      result.status = absl::UnavailableError(absl::StrFormat(
          "cannot connect to the server at %s within %s", options_.target,
          absl::FormatDuration(options_.connect_timeout)));
      sum.set_first_error(std::string(result.status.message()));
      sum.set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
      st->StopPollers();
      return result;
    }
  }
  {
    absl::MutexLock l(&mu_);
    current_ = st;
  }
  const double cpu0 = CpuSeconds();
  const int64_t t0 = MonoNs();
  st->warmup_end_ns = t0 + static_cast<int64_t>(spec.warmup_s() * 1e9);
  if (spec.duration_s() > 0) {
    st->measure_end_ns =
        st->warmup_end_ns + static_cast<int64_t>(spec.duration_s() * 1e9);
  }
  Sends sends;
  if (st->open_loop) {
    SendOpenLoop(st.get(), t0, options_.late_tolerance, stop, &sends);
  } else {
    // Closed loop: `concurrency` slots, each re-armed by its completion.
    const int nch = static_cast<int>(st->channels.size());
    for (uint32_t i = 0; i < spec.concurrency(); ++i) {
      if (!st->Issue(nullptr, static_cast<int>(i % nch), MonoNs())) break;
    }
  }
  st->WaitDrained(stop, &sends.interrupted);
  // Cancels anything still in flight (only past the safety net) and joins.
  st->StopPollers();
  const double cpu = CpuSeconds() - cpu0;
  {
    absl::MutexLock l(&mu_);
    current_.reset();
  }
  Summarize(st.get(), cpu, sends, &result);
  return result;
}

}  // namespace rsslab
