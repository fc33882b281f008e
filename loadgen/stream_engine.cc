// The load engine's streaming calls: one gRPC callback-API reactor per
// stream (server-, client- and bidi-streaming alike) and the step's message
// figures. The unary calls and the step itself are engine.cc's.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/alarm.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "loadgen/engine.h"
#include "loadgen/engine_state.h"

namespace rsslab {

using engine_internal::MonoNs;

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

namespace engine_internal {

// A streaming call's message counts, latency and rate, over the same
// measured span as the streams' own rate.
void SummarizeMessages(LoadEngine::RunState* st, rsslab::v1::LoadSummary* sum) {
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

}  // namespace engine_internal
}  // namespace rsslab
