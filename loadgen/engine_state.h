// The state one load step's run shares with its in-flight RPCs and streams:
// engine.cc issues and records unary calls on it and runs the step,
// stream_engine.cc runs streams on it. Private to the engine library.
#ifndef RSSLAB_LOADGEN_ENGINE_STATE_H_
#define RSSLAB_LOADGEN_ENGINE_STATE_H_

#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "loadgen/engine.h"
#include "loadgen/step_counts.h"
#include "proto/load.grpc.pb.h"

namespace rsslab {
namespace engine_internal {

inline int64_t MonoNs() { return StepMonoNs(); }

// Per-request seeds: a fixed function of (--seed, request index), so the
// same run sends the same set of requests whatever the interleaving.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

inline void AtomicMin(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v)) {
  }
}

// A streaming call's message figures into the step's summary
// (stream_engine.cc).
void SummarizeMessages(LoadEngine::RunState* st, rsslab::v1::LoadSummary* sum);

}  // namespace engine_internal

struct LoadEngine::RunState : StepCounts, std::enable_shared_from_this<LoadEngine::RunState> {
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
    rsslab::v1::HandleRequest req;
    rsslab::v1::HandleResponse resp;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<rsslab::v1::HandleResponse>> reader;
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
    std::array<uint64_t, kStatusCodes> codes ABSL_GUARDED_BY(mu) = {};
    uint64_t req_bytes ABSL_GUARDED_BY(mu) = 0;
    uint64_t resp_bytes ABSL_GUARDED_BY(mu) = 0;
    // Streaming calls: `hist` and `codes` count whole streams, these their
    // messages (measured streams only).
    Histogram messages ABSL_GUARDED_BY(mu);
    uint64_t messages_sent ABSL_GUARDED_BY(mu) = 0;
    uint64_t messages_received ABSL_GUARDED_BY(mu) = 0;
  };

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

  std::atomic<int64_t> in_flight{0};

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

  int max_receive_mb = kDefaultMaxReceiveMb;  // named in a too-large reply's error

  // Every request's fixed part (params, payload, return_body), built once;
  // a new slot copies it, a reused slot keeps it and changes id/seed only.
  rsslab::v1::HandleRequest request_template;

  // Issues request number next_index on `channel`, intended at
  // `intended_ns`, in `call` (a slot to reuse, or null for a fresh one);
  // false when the step wants no more requests (then `call` is freed).
  bool Issue(Call* call, int channel, int64_t intended_ns) {
    if (streaming) return IssueStream(channel, intended_ns);
    if (!Admit(intended_ns, &call)) return false;
    const uint64_t idx = call->req.id();
    call->intended_ns = intended_ns;
    call->channel = channel;
    call->req.set_seed(engine_internal::SplitMix64(spec.seed() + idx));
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
    if (!StepCounts::Take(intended_ns, idx, warm)) return false;
    in_flight.fetch_add(1);
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
    const int64_t end = engine_internal::MonoNs();
    const int code = static_cast<int>(s.error_code());
    if (!f.warm) {
      Shard& shard = *shards[f.channel];
      absl::MutexLock l(&shard.mu);
      const uint64_t lat = static_cast<uint64_t>(std::max<int64_t>(0, end - f.intended_ns));
      shard.hist.Record(lat);
      shard.interval.Record(lat);
      shard.codes[code >= 0 && code < kStatusCodes ? code : 2]++;
      shard.req_bytes += f.req_bytes;
      shard.resp_bytes += f.resp_bytes;
    }
    Finish(s.ok(), f.warm, end, [&] {
      return CallErrorText(code, s.error_message(), max_receive_mb);
    });
    if (metrics != nullptr) {
      metrics->OnDone(code, absl::Nanoseconds(std::max<int64_t>(0, end - f.intended_ns)), f.warm);
    }
    return end;
  }

  // An RPC is over (after its successor, if any, was issued).
  void Retire() {
    if (in_flight.fetch_sub(1) == 1) {
      absl::MutexLock l(&mu);  // wakes WaitDrained
    }
  }

  static constexpr size_t kKeptBodyBytes = 256 << 10;

  void OnDone(Call* call) {
    Finished f{call->channel, call->warm, call->intended_ns, 0, 0};
    if (source != nullptr) {
      f.req_bytes = call->req_bytes;
      f.resp_bytes = call->gresp.Length();
      call->gresp.Clear();  // content not looked at
    } else if (call->resp.body().capacity() > kKeptBodyBytes) {
      // Parsing reuses the slot's body, so each slot would keep its largest
      // reply for the step: concurrency x --max_receive_mb outside gRPC's
      // quota (a peer answering 60 MiB replies one at a time took the
      // loadgen to 1.2 GiB at concurrency 16). Small ones stay: no
      // allocation per RPC.
      std::string().swap(*call->resp.mutable_body());
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
      if (engine_internal::MonoNs() >= measure_end_ns) stopping = true;
      if (!stop_seen && stop != nullptr && stop->stopped()) {
        stop_seen = true;
        *interrupted = true;
        stopping = true;
        stop_streams = true;
        // Every RPC has a deadline, so this bound is only a safety net.
        give_up = engine_internal::MonoNs() + int64_t{spec.deadline_ms()} * 1000000 +
                  2000000000;
      }
      if (engine_internal::MonoNs() > give_up) return;  // StopPollers() then waits them out
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

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_ENGINE_STATE_H_
