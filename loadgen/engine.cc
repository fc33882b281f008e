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
#include "grpcpp/alarm.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/load.grpc.pb.h"

namespace rsslab {
namespace {

using ::rsslab::v1::HandleRequest;
using ::rsslab::v1::HandleResponse;
using ::rsslab::v1::LoadSpec;

constexpr int kCodes = kStatusCodes;

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

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

// Per-request seeds: a fixed function of (--seed, request index), so the
// same run sends the same set of requests whatever the interleaving.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

void AtomicMin(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v)) {
  }
}

}  // namespace

struct LoadEngine::RunState : std::enable_shared_from_this<LoadEngine::RunState> {
  // One RPC slot. Closed loop: a completion re-arms its own slot for the
  // next request, so the request (with its params and payload), the response
  // and the slot itself are built once per slot, not once per RPC (profile:
  // malloc/free and the params map copy were a visible share of the
  // loadgen's CPU). Only the ClientContext is per RPC: gRPC forbids reusing
  // one, so it is re-emplaced in place (no heap allocation for it either).
  struct Call {
    // Two, used in turn, so a context outlives its call by one completion:
    // under the callback API the next call is issued from inside the
    // previous call's callback, and gRPC does not document destroying a
    // context there as safe. (A slot retired at a step's end is freed in
    // its callback; that has held in every test, and gRPC's callback tag
    // keeps its own reference to the call.)
    std::optional<grpc::ClientContext> ctxs[2];
    int cur = 0;
    grpc::ClientContext& ctx() { return *ctxs[cur]; }
    HandleRequest req;
    HandleResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<HandleResponse>> reader;
    // A user's call (RunState::source): the slot's request message, rebuilt
    // in place per RPC, and the wire buffers.
    std::unique_ptr<google::protobuf::Message> gmsg;
    grpc::ByteBuffer greq;
    grpc::ByteBuffer gresp;
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> greader;
    uint64_t req_bytes = 0;
    int64_t intended_ns = 0;
    int channel = 0;
    bool warm = false;
  };

  // Per channel; a channel's RPCs all complete on one poller thread, so the
  // mutex is uncontended except when Progress() reads the shard.
  struct Shard {
    absl::Mutex mu;
    Histogram hist ABSL_GUARDED_BY(mu);
    // Since the last TakeInterval(): reset each interval, so a soak's
    // per-interval latency costs one histogram per channel, not one per
    // interval.
    Histogram interval ABSL_GUARDED_BY(mu);
    std::array<uint64_t, kCodes> codes ABSL_GUARDED_BY(mu) = {};
    uint64_t req_bytes ABSL_GUARDED_BY(mu) = 0;
    uint64_t resp_bytes ABSL_GUARDED_BY(mu) = 0;
    // Streaming calls: `hist` and `codes` count whole streams, these their
    // messages (measured streams only).
    Histogram messages ABSL_GUARDED_BY(mu);
    uint64_t messages_sent ABSL_GUARDED_BY(mu) = 0;
    uint64_t messages_received ABSL_GUARDED_BY(mu) = 0;
  };

  LoadSpec spec;
  uint64_t max_errors = 0;
  LoadgenMetrics* metrics = nullptr;  // not owned; may be null
  std::string payload;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<rsslab::v1::Load::Stub>> stubs;
  // The user's call, when the spec names one: sent on generic stubs.
  std::shared_ptr<const RequestSource> source;
  std::vector<std::unique_ptr<grpc::GenericStub>> gstubs;
  const std::vector<std::pair<std::string, std::string>>* metadata = nullptr;
  std::vector<std::unique_ptr<Shard>> shards;
  bool open_loop = false;
  bool callback_api = false;
  // The user's call streams (source->streaming()): each request is a
  // StreamCall on the callback API, closed and open loop alike.
  bool streaming = false;
  int64_t stream_interval_ns = 0;
  // Set when a stop request is seen: streams write no more messages.
  std::atomic<bool> stop_streams{false};

  int64_t warmup_end_ns = 0;   // sends intended before this are warm-up
  int64_t measure_end_ns = std::numeric_limits<int64_t>::max();

  std::atomic<uint64_t> next_index{0};
  std::atomic<uint64_t> measured_issued{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> failed{0};        // measured
  std::atomic<uint64_t> failed_all{0};    // including warm-up
  std::atomic<uint64_t> warm_done{0};
  std::atomic<int64_t> measure_start_ns{std::numeric_limits<int64_t>::max()};
  std::atomic<int64_t> last_done_ns{0};

  // One completion queue per poller thread; channel i uses cqs[i % n].
  std::vector<std::unique_ptr<grpc::CompletionQueue>> cqs;
  std::vector<std::thread> pollers;

  void Poll(grpc::CompletionQueue* cq) {
    void* tag;
    bool ok;
    while (cq->Next(&tag, &ok)) {
      OnDone(static_cast<Call*>(tag));
    }
  }

  void StopPollers() {
    for (auto& cq : cqs) cq->Shutdown();
    for (auto& t : pollers) t.join();
    pollers.clear();
  }

  // Taken (briefly) whenever in_flight drops, so waiters re-check.
  absl::Mutex mu;
  std::string first_error ABSL_GUARDED_BY(mu);
  bool too_many_errors ABSL_GUARDED_BY(mu) = false;

  // Every request's fixed part (params, payload, return_body), built once;
  // a new slot copies it, a reused slot keeps it and changes id/seed only.
  HandleRequest request_template;

  // Issues request number next_index on `channel`, intended at
  // `intended_ns`, in `call` (a slot to reuse, or null for a fresh one);
  // false when the step wants no more requests (then `call` is freed).
  bool Issue(Call* call, int channel, int64_t intended_ns) {
    if (streaming) return IssueStream(channel, intended_ns);
    if (!Admit(intended_ns, &call)) return false;
    const uint64_t idx = call->req.id();
    call->intended_ns = intended_ns;
    call->channel = channel;
    call->req.set_seed(SplitMix64(spec.seed() + idx));
    call->cur ^= 1;
    call->ctxs[call->cur].emplace();  // destroys the one before last, if any
    call->ctx().set_deadline(std::chrono::system_clock::now() +
                            std::chrono::milliseconds(spec.deadline_ms()));
    for (const auto& [k, v] : *metadata) call->ctx().AddMetadata(k, v);
    if (source != nullptr) {
      IssueGeneric(call, channel, idx);
      return true;
    }
    if (callback_api) {
      // gRPC's callback API: the completion usually runs inside the ExecCtx
      // of the read that finished the call, so the next call issued from
      // it joins that ExecCtx, and the calls one read finished leave in one
      // write (strace: 4,701 sendmsg per 20,000 calls, against 12,285 with
      // completion queues), so the server also reads them in batches. The
      // shared_ptr keeps the state alive for a callback still returning.
      stubs[channel]->async()->Handle(
          &call->ctx(), &call->req, &call->resp,
          [self = shared_from_this(), call](grpc::Status st) {
            call->status = std::move(st);
            self->OnDone(call);
          });
      return true;
    }
    // Completion queues: one of this engine's poller threads completes it.
    call->reader = stubs[channel]->PrepareAsyncHandle(
        &call->ctx(), call->req, cqs[channel % cqs.size()].get());
    call->reader->StartCall();
    call->reader->Finish(&call->resp, &call->status, call);
    return true;
  }

  // The user's call: request `idx` built into the slot's message, serialized
  // straight into one slice (no intermediate string), sent by name.
  void IssueGeneric(Call* call, int channel, uint64_t idx) {
    source->Build(idx, spec.seed(), call->gmsg.get());
    const size_t n = call->gmsg->ByteSizeLong();
    grpc::Slice slice(n);
    call->gmsg->SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
    grpc::ByteBuffer wire(&slice, 1);
    call->greq.Swap(&wire);
    call->req_bytes = n;
    if (callback_api) {
      gstubs[channel]->UnaryCall(&call->ctx(), source->method_path(), grpc::StubOptions(),
                                 &call->greq, &call->gresp,
                                 [self = shared_from_this(), call](grpc::Status st) {
                                   call->status = std::move(st);
                                   self->OnDone(call);
                                 });
      return;
    }
    call->greader = gstubs[channel]->PrepareUnaryCall(&call->ctx(), source->method_path(),
                                                      call->greq, cqs[channel % cqs.size()].get());
    call->greader->StartCall();
    call->greader->Finish(&call->gresp, &call->status, call);
  }

  // A stream of the streaming call (StreamCall, below), request (stream)
  // number next_index; false when the step wants no more.
  bool IssueStream(int channel, int64_t intended_ns);

  // Takes the next request index if the step wants another request (and
  // counts it in flight); false otherwise.
  bool Take(int64_t intended_ns, uint64_t* idx, bool* warm) {
    if (stopping.load(std::memory_order_relaxed)) return false;
    if (intended_ns >= measure_end_ns) {
      stopping = true;
      return false;
    }
    *idx = next_index.fetch_add(1);
    *warm = *idx < spec.warmup_requests() || intended_ns < warmup_end_ns;
    if (!*warm) {
      if (spec.requests() > 0 &&
          measured_issued.fetch_add(1) >= spec.requests()) {
        stopping = true;
        return false;
      }
      AtomicMin(measure_start_ns, intended_ns);
    }
    in_flight.fetch_add(1);
    if (metrics != nullptr) metrics->OnSend();
    return true;
  }

  // Takes the next request index, as Take, into *call (allocating a slot
  // when null); otherwise frees *call.
  bool Admit(int64_t intended_ns, Call** call) {
    uint64_t idx = 0;
    bool warm = false;
    if (!Take(intended_ns, &idx, &warm)) {
      delete *call;
      *call = nullptr;
      return false;
    }
    if (*call == nullptr) {
      *call = new Call;
      if (source != nullptr) {
        (*call)->gmsg = source->NewMessage();
      } else {
        (*call)->req = request_template;
      }
    }
    (*call)->req.set_id(idx);
    (*call)->warm = warm;
    return true;
  }

  // What one finished RPC (a unary call, or a whole stream) carried, for
  // Record.
  struct Finished {
    int channel = 0;
    bool warm = false;
    int64_t intended_ns = 0;
    uint64_t req_bytes = 0, resp_bytes = 0;
  };

  // Records one finished RPC: its latency from the intended send, its
  // status (a failure counted once, against --max_errors) and its bytes
  // (user's calls); returns its end time.
  int64_t Record(const Finished& f, const grpc::Status& s) {
    const int64_t end = MonoNs();
    const int code = static_cast<int>(s.error_code());
    if (!f.warm) {
      Shard& shard = *shards[f.channel];
      absl::MutexLock l(&shard.mu);
      const uint64_t lat = static_cast<uint64_t>(std::max<int64_t>(0, end - f.intended_ns));
      shard.hist.Record(lat);
      shard.interval.Record(lat);
      shard.codes[code >= 0 && code < kCodes ? code : 2]++;
      shard.req_bytes += f.req_bytes;
      shard.resp_bytes += f.resp_bytes;
    }
    if (!s.ok()) {
      const uint64_t n = failed_all.fetch_add(1) + 1;
      if (!f.warm) failed.fetch_add(1);
      absl::MutexLock l(&mu);
      if (first_error.empty()) {
        first_error = absl::StrFormat("%s: %s", StatusCodeName(code), s.error_message());
      }
      if (n > max_errors) {
        too_many_errors = true;
        stopping = true;
      }
    }
    if (metrics != nullptr) {
      metrics->OnDone(code, absl::Nanoseconds(std::max<int64_t>(0, end - f.intended_ns)), f.warm);
    }
    if (f.warm) {
      warm_done.fetch_add(1);
    } else {
      done.fetch_add(1);
      AtomicMax(last_done_ns, end);
    }
    return end;
  }

  // An RPC is over (after its successor, if any, was issued).
  void Retire() {
    if (in_flight.fetch_sub(1) == 1) {
      absl::MutexLock l(&mu);  // wakes WaitDrained
    }
  }

  void OnDone(Call* call) {
    Finished f{call->channel, call->warm, call->intended_ns, 0, 0};
    if (source != nullptr) {
      f.req_bytes = call->req_bytes;
      f.resp_bytes = call->gresp.Length();
      call->gresp.Clear();  // content not looked at
    }
    const int64_t end = Record(f, call->status);
    call->reader.reset();  // lives in the call's arena: releases nothing
    call->greader.reset();
    if (!callback_api) call->ctxs[call->cur].reset();  // ends the RPC's call object
    if (open_loop) {
      delete call;
    } else {
      // Closed loop: the slot goes straight back out (or is freed).
      Issue(call, call->channel, end);
    }
    Retire();
  }

  // Until nothing is in flight, polling `stop` (and the duration) meanwhile.
  void WaitDrained(const StopFlag* stop, bool* interrupted) {
    bool stop_seen = false;
    int64_t give_up = std::numeric_limits<int64_t>::max();
    while (true) {
      mu.LockWhenWithTimeout(absl::Condition(
                                 +[](std::atomic<int64_t>* n) {
                                   return n->load() == 0;
                                 },
                                 &in_flight),
                             absl::Milliseconds(20));
      mu.Unlock();
      // Closed loop: each completion issues the next, so nothing in flight
      // means nothing more will be sent. Open loop: the schedule has ended.
      if (in_flight.load() == 0) return;
      if (MonoNs() >= measure_end_ns) stopping = true;
      if (!stop_seen && stop != nullptr && stop->stopped()) {
        stop_seen = true;
        *interrupted = true;
        stopping = true;
        stop_streams = true;
        // Every RPC has a deadline, so this bound is only a safety net.
        give_up = MonoNs() + int64_t{spec.deadline_ms()} * 1000000 +
                  2000000000;
      }
      if (MonoNs() > give_up) return;  // StopPollers() then waits them out
    }
  }

  Histogram Merged() {
    Histogram h;
    for (auto& s : shards) {
      absl::MutexLock l(&s->mu);
      h.Merge(s->hist);
    }
    return h;
  }
};

namespace {

// One stream of a streaming call, on gRPC's callback API through the generic
// stub: its request messages written in turn (each after the pause
// --stream_interval asks for), the last with WriteLast; replies read as they
// come; the server's status ends it. A stream is one request of the step
// (its latency, its one status); its messages go to the message histogram:
//   bidi: a reply from the send of the request message it answers (the k-th
//         reply answers the k-th message, or the last one sent so far);
//   server streaming: a reply from the previous one (the first from the
//         request);
//   client streaming: a request message from its write to the write's end.
// Freed in OnDone (the callback API's own pattern), after the closed loop
// has started the next stream.
class StreamCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  using RunState = LoadEngine::RunState;
  using Kind = RequestSource::Kind;

  StreamCall(std::shared_ptr<RunState> st, uint64_t idx, bool warm, int channel,
             int64_t intended_ns)
      : st_(std::move(st)),
        kind_(st_->source->kind()),
        n_(st_->source->messages()),
        idx_(idx),
        fin_{channel, warm, intended_ns, 0, 0} {}

  void Start() {
    ctx_.set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(st_->spec.deadline_ms()));
    for (const auto& [k, v] : *st_->metadata) ctx_.AddMetadata(k, v);
    if (kind_ == Kind::kBidi) send_ns_.resize(n_);
    msg_ = st_->source->NewMessage();
    st_->gstubs[fin_.channel]->PrepareBidiStreamingCall(&ctx_, st_->source->method_path(),
                                                       grpc::StubOptions(), this);
    // The writer's hold: OnDone waits until the last message has been
    // written (or writing failed), so no pause's alarm outlives the stream.
    AddHold();
    last_read_ns_ = MonoNs();
    StartRead(&in_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    const int64_t now = MonoNs();
    if (!ok) {  // the stream is over; its status says why
      RemoveHold();
      return;
    }
    if (kind_ == Kind::kClientStreaming) Message(now - write_ns_);
    if (++sent_ == n_) {
      RemoveHold();
      return;
    }
    if (st_->stream_interval_ns > 0) {
      alarm_.Set(std::chrono::system_clock::now() +
                     std::chrono::nanoseconds(st_->stream_interval_ns),
                 [this](bool) { Next(); });
      return;
    }
    Next();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the server's end: its status comes to OnDone
    const int64_t now = MonoNs();
    fin_.resp_bytes += in_.Length();
    in_.Clear();  // content not looked at
    int64_t from = last_read_ns_;
    if (kind_ == Kind::kBidi) {
      const uint32_t started = started_.load(std::memory_order_acquire);
      if (started > 0) from = send_ns_[std::min<uint64_t>(received_, started - 1)];
    }
    last_read_ns_ = now;
    ++received_;
    if (kind_ != Kind::kClientStreaming) Message(now - from);
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override {
    std::shared_ptr<RunState> st = std::move(st_);
    const int64_t end = st->Record(fin_, s);
    if (!fin_.warm) {
      RunState::Shard& shard = *st->shards[fin_.channel];
      absl::MutexLock l(&shard.mu);
      shard.messages_sent += sent_;
      shard.messages_received += received_;
    }
    const int channel = fin_.channel;
    delete this;
    if (!st->open_loop) st->IssueStream(channel, end);
    st->Retire();
  }

 private:
  // The next message, or after a stop request the end of writing (the
  // service then ends the stream as it would have after the last one).
  void Next() {
    if (st_->stop_streams.load(std::memory_order_relaxed)) {
      StartWritesDone();
      RemoveHold();
      return;
    }
    WriteNext();
  }

  // Message sent_ of this stream, built and written (the last one as
  // WriteLast: no separate WritesDone).
  void WriteNext() {
    st_->source->BuildMessage(idx_, sent_, st_->spec.seed(), msg_.get());
    const size_t n = msg_->ByteSizeLong();
    grpc::Slice slice(n);
    msg_->SerializeWithCachedSizesToArray(const_cast<uint8_t*>(slice.begin()));
    grpc::ByteBuffer wire(&slice, 1);
    out_.Swap(&wire);
    fin_.req_bytes += n;
    write_ns_ = MonoNs();
    if (kind_ == Kind::kBidi) {
      send_ns_[sent_] = write_ns_;
      started_.store(sent_ + 1, std::memory_order_release);
    }
    if (sent_ + 1 == n_) {
      StartWriteLast(&out_, grpc::WriteOptions());
    } else {
      StartWrite(&out_);
    }
  }

  void Message(int64_t ns) {
    if (fin_.warm) return;
    RunState::Shard& shard = *st_->shards[fin_.channel];
    absl::MutexLock l(&shard.mu);
    shard.messages.Record(static_cast<uint64_t>(std::max<int64_t>(0, ns)));
  }

  std::shared_ptr<RunState> st_;
  const Kind kind_;
  const uint32_t n_;
  const uint64_t idx_;
  RunState::Finished fin_;
  grpc::ClientContext ctx_;
  std::unique_ptr<google::protobuf::Message> msg_;
  grpc::ByteBuffer out_, in_;
  grpc::Alarm alarm_;
  // Writer side (OnWriteDone, the alarm): one write at a time.
  uint32_t sent_ = 0;
  int64_t write_ns_ = 0;
  // Bidi: each message's send time, published to the reader by started_.
  std::vector<int64_t> send_ns_;
  std::atomic<uint32_t> started_{0};
  // Reader side (OnReadDone): one read at a time.
  uint64_t received_ = 0;
  int64_t last_read_ns_ = 0;
};

}  // namespace

bool LoadEngine::RunState::IssueStream(int channel, int64_t intended_ns) {
  uint64_t idx = 0;
  bool warm = false;
  if (!Take(intended_ns, &idx, &warm)) return false;
  (new StreamCall(shared_from_this(), idx, warm, channel, intended_ns))->Start();
  return true;
}

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
  LiveProgress p;
  if (st == nullptr) return p;
  p.running = true;
  p.done = st->done.load();
  p.failed = st->failed.load();
  p.target = st->spec.requests();
  p.p99_us = st->Merged().Percentile(99) / 1e3;
  const int64_t start = st->measure_start_ns.load();
  const int64_t now = MonoNs();
  p.elapsed_s = start < now ? (now - start) / 1e9 : 0;
  return p;
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
    args.SetMaxReceiveMessageSize(-1);
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

// How the sends kept to their schedule (open loop), and whether a stop
// request cut the step short.
struct Sends {
  uint64_t late = 0;
  // Due before the step's end but not sent when its time was up.
  uint64_t not_sent = 0;
  int64_t max_lag_ns = 0;
  bool interrupted = false;
};

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

// A streaming call's message counts, latency and rate, over the same
// measured span as the streams' own rate.
void SummarizeMessages(RunState* st, rsslab::v1::LoadSummary* sum) {
  Histogram h;
  uint64_t sent = 0, received = 0;
  for (auto& s : st->shards) {
    absl::MutexLock l(&s->mu);
    h.Merge(s->messages);
    sent += s->messages_sent;
    received += s->messages_received;
  }
  sum->set_streaming(true);
  sum->set_messages_sent(sent);
  sum->set_messages_received(received);
  *sum->mutable_message_latency() = h.LatencyMicros();
  *sum->mutable_message_histogram() = h.ToProto();
  const int64_t ms = st->measure_start_ns.load();
  const int64_t me = st->last_done_ns.load();
  const double elapsed = me > ms ? (me - ms) / 1e9 : 0;
  // The busier direction: replies (server streaming, bidi) or requests
  // (client streaming).
  sum->set_messages_per_s(elapsed > 0 ? std::max(sent, received) / elapsed : 0);
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
  result->histogram = st->Merged();
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
  const uint64_t done = st->done.load();
  const uint64_t failed = st->failed.load();
  sum.set_requests_ok(done - failed);
  sum.set_requests_failed(failed);
  sum.set_warmup_requests(st->warm_done.load());
  const int64_t ms = st->measure_start_ns.load();
  const int64_t me = st->last_done_ns.load();
  const double elapsed = (done > 0 && me > ms) ? (me - ms) / 1e9 : 0;
  sum.set_elapsed_s(elapsed);
  sum.set_qps(elapsed > 0 ? done / elapsed : 0);
  *sum.mutable_latency() = result->histogram.LatencyMicros();
  sum.set_client_cpu_s(cpu);
  sum.set_requests_per_client_cpu_s(cpu > 0 ? done / cpu : 0);
  sum.set_behind_schedule(sends.late);
  sum.set_not_sent(sends.not_sent);
  sum.set_max_schedule_lag_us(sends.max_lag_ns / 1e3);
  *sum.mutable_histogram() = result->histogram.ToProto();
  sum.set_interrupted(sends.interrupted);
  sum.set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  {
    absl::MutexLock l(&st->mu);
    sum.set_first_error(st->first_error);
    if (st->too_many_errors) {
      result->status = absl::AbortedError(absl::StrFormat(
          "%d RPCs failed (more than --max_errors=%d); first: %s",
          st->failed_all.load(), st->max_errors, st->first_error));
    }
  }
  if (result->status.ok() && sends.interrupted) {
    result->status = absl::CancelledError("interrupted");
  }
  if (result->status.ok() && st->spec.requests() > 0 && done < st->spec.requests()) {
    result->status = absl::InternalError(absl::StrFormat(
        "only %d of %d requests completed", done, st->spec.requests()));
  }
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
