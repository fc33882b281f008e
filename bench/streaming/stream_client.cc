// The comparison client of bench/streaming.sh: rsslab.v1.Load/HandleStream
// through the generated stub (load.grpc.pb.h, callback API), in the shape
// the loadgen streams a user's method: `concurrency` streams in flight over
// `channels` connections, each of `messages` HandleRequest{id, seed}
// messages written in turn (the last with WriteLast) while the replies are
// read as they come; each finished stream starts the next. Prints one line:
//   streams=S messages=M elapsed_s=E streams_per_s=X messages_per_s=Y failed=F
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/grpcpp.h"
#include "proto/load.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "rsslab_server's data address.");
ABSL_FLAG(int, concurrency, 16, "Streams in flight (1-10000).");
ABSL_FLAG(int, channels, 4, "Connections (1-64).");
ABSL_FLAG(int, messages, 10, "Request messages per stream (1-100000).");
ABSL_FLAG(int64_t, streams, 2000, "Measured streams (1-1e8).");
ABSL_FLAG(int64_t, warmup_streams, 200, "Streams before the measured ones (0-1e8).");

namespace {

using ::rsslab::v1::HandleRequest;
using ::rsslab::v1::HandleResponse;

struct Run {
  std::vector<std::unique_ptr<rsslab::v1::Load::Stub>> stubs;
  int messages = 0;
  int64_t warmup = 0, total = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> received{0};  // measured streams' replies
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> start_ns{0};
  absl::Notification all_done;
  void StartStream(int channel);
  void Finished() {
    if (in_flight.fetch_sub(1) == 1) all_done.Notify();
  }
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class Stream final : public grpc::ClientBidiReactor<HandleRequest, HandleResponse> {
 public:
  Stream(Run* run, int64_t id, int channel) : run_(run), id_(id), channel_(channel) {
    req_.set_id(static_cast<uint64_t>(id));
    run->stubs[channel]->async()->HandleStream(&ctx_, this);
    AddHold();  // until the last write: OnDone comes after it
    StartRead(&resp_);
    Write();
    StartCall();
  }
  void OnWriteDone(bool ok) override {
    if (!ok || ++sent_ == run_->messages) {
      RemoveHold();
      return;
    }
    Write();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    ++received_;
    StartRead(&resp_);
  }
  void OnDone(const grpc::Status& s) override {
    Run* run = run_;
    if (id_ >= run->warmup) {
      run->received.fetch_add(received_);
      if (!s.ok()) run->failed.fetch_add(1);
    }
    const int channel = channel_;
    delete this;
    run->StartStream(channel);
    run->Finished();
  }

 private:
  void Write() {
    req_.set_seed(static_cast<uint64_t>(sent_));
    if (sent_ + 1 == run_->messages) {
      StartWriteLast(&req_, grpc::WriteOptions());
    } else {
      StartWrite(&req_);
    }
  }
  Run* run_;
  const int64_t id_;
  const int channel_;
  grpc::ClientContext ctx_;
  HandleRequest req_;
  HandleResponse resp_;
  int sent_ = 0;
  int64_t received_ = 0;
};

void Run::StartStream(int channel) {
  const int64_t id = next.fetch_add(1);
  if (id >= total) return;
  if (id == warmup) start_ns.store(NowNs());
  in_flight.fetch_add(1);
  new Stream(this, id, channel);
}

bool InRange(int64_t v, int64_t lo, int64_t hi, const char* name) {
  if (v >= lo && v <= hi) return true;
  std::fprintf(stderr, "stream_client: --%s=%lld: want %lld to %lld\n", name,
               static_cast<long long>(v), static_cast<long long>(lo), static_cast<long long>(hi));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Run run;
  const int conc = absl::GetFlag(FLAGS_concurrency), nch = absl::GetFlag(FLAGS_channels);
  run.messages = absl::GetFlag(FLAGS_messages);
  run.warmup = absl::GetFlag(FLAGS_warmup_streams);
  const int64_t streams = absl::GetFlag(FLAGS_streams);
  if (!InRange(conc, 1, 10000, "concurrency") || !InRange(nch, 1, 64, "channels") ||
      !InRange(run.messages, 1, 100000, "messages") || !InRange(streams, 1, 100000000, "streams") ||
      !InRange(run.warmup, 0, 100000000, "warmup_streams")) {
    return 2;
  }
  run.total = run.warmup + streams;
  for (int i = 0; i < nch; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
    args.SetInt("rsslab.channel_index", i);
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);  // as the loadgen's channels
    run.stubs.push_back(rsslab::v1::Load::NewStub(grpc::CreateCustomChannel(
        absl::GetFlag(FLAGS_target), grpc::InsecureChannelCredentials(), args)));
  }
  run.in_flight.fetch_add(1);  // the starter's own, so all_done waits for every start
  for (int i = 0; i < conc; ++i) run.StartStream(i % nch);
  run.Finished();
  run.all_done.WaitForNotification();
  const double elapsed = (NowNs() - run.start_ns.load()) / 1e9;
  std::printf("streams=%lld messages=%lld elapsed_s=%.3f streams_per_s=%.1f messages_per_s=%.1f "
              "failed=%lld\n",
              static_cast<long long>(streams), static_cast<long long>(run.received.load()),
              elapsed, streams / elapsed, run.received.load() / elapsed,
              static_cast<long long>(run.failed.load()));
  return run.failed.load() == 0 ? 0 : 1;
}
