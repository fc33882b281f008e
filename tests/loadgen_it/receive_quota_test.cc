// A hostile peer's huge replies cannot take the loadgen's memory: gRPC 1.51
// assembles each reply whole before --max_receive_mb rejects it, so without
// the process's resource quota 16 calls of 64 MiB replies held ~1 GiB. The
// peer is in this process, on loopback; the loadgen is the real binary.

#include <sys/types.h>

#include <cstdio>
#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/loadgen_it/loadgen_testing.h"

namespace {

using ::rsslab::testing::Child;
using ::rsslab::testing::Loadgen;
using ::rsslab::testing::ReadFile;
using ::rsslab::testing::Tmp;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

#if defined(__SANITIZE_ADDRESS__)
// ASan holds freed memory in quarantine (256 MiB by default): a peak RSS
// there says nothing about gRPC's buffers; the failures are still checked.
constexpr bool kRssMeansHeap = false;
#else
constexpr bool kRssMeansHeap = true;
#endif

// Answers every call with the same HandleResponse whose body is `mb` MiB,
// one shared buffer sent without copies (the peer stays small and fast);
// `one_at_a_time`: a reply starts only once the previous one is sent.
class HugeReplies : public grpc::CallbackGenericService {
 public:
  HugeReplies(int mb, bool one_at_a_time) : one_at_a_time_(one_at_a_time) {
    const size_t n = static_cast<size_t>(mb) << 20;
    wire_ = "\x22";  // field 4 (body), length-delimited
    for (size_t v = n;; v >>= 7) {
      if (v < 0x80) {
        wire_.push_back(static_cast<char>(v));
        break;
      }
      wire_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    }
    wire_.append(n, 'x');
  }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new Reactor(this);
  }

 private:
  class Reactor : public grpc::ServerGenericBidiReactor {
   public:
    explicit Reactor(HugeReplies* svc) : svc_(svc) {
      grpc::Slice s(svc->wire_.data(), svc->wire_.size(), grpc::Slice::STATIC_SLICE);
      reply_ = grpc::ByteBuffer(&s, 1);
      StartRead(&request_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "no request"));
        return;
      }
      if (svc_->one_at_a_time_) {
        absl::MutexLock l(&svc_->mu_);
        if (svc_->busy_) {
          svc_->waiting_.push_back(this);
          return;
        }
        svc_->busy_ = true;
      }
      Send();
    }
    void OnDone() override {
      if (svc_->one_at_a_time_ && sent_) {
        Reactor* next = nullptr;
        {
          absl::MutexLock l(&svc_->mu_);
          if (svc_->waiting_.empty()) {
            svc_->busy_ = false;
          } else {
            next = svc_->waiting_.front();
            svc_->waiting_.pop_front();
          }
        }
        if (next != nullptr) next->Send();
      }
      delete this;
    }
    void Send() {
      sent_ = true;
      StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
    }

   private:
    HugeReplies* const svc_;
    grpc::ByteBuffer request_, reply_;
    bool sent_ = false;
  };

  const bool one_at_a_time_;
  std::string wire_;
  absl::Mutex mu_;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Reactor*> waiting_ ABSL_GUARDED_BY(mu_);
};

// The loadgen against `service` on loopback; its peak RSS in KiB.
long LoadgenPeakKb(HugeReplies* service, const std::string& max_receive_mb,
                   const std::string& out) {
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterCallbackGenericService(service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return -1;
  Child lg(Loadgen(), {absl::StrCat("--target=127.0.0.1:", port), "--control=",
                       "--concurrency=16", "--channels=16", "--requests=32", "--return_body",
                       "--max_receive_mb=" + max_receive_mb, "--max_errors=100000",
                       "--deadline_ms=30000", "--progress=none", "--out=" + out});
  const int rc = lg.Wait(absl::Seconds(120));
  server->Shutdown(std::chrono::system_clock::now());
  EXPECT_EQ(rc, 0) << lg.Stderr();  // failures under --max_errors end nothing
  EXPECT_GT(lg.max_rss_kb(), 0);
  std::printf("loadgen peak RSS: %ld KiB\n", lg.max_rss_kb());
  return lg.max_rss_kb();
}

TEST(ReceiveQuota, HugeRepliesAtConcurrency16KeepTheLoadgenUnder320MiB) {
  HugeReplies service(64, /*one_at_a_time=*/false);
  const std::string out = Tmp("receive_quota");
  const long peak = LoadgenPeakKb(&service, "1", out);
  // The calls failed: over the bound, or cancelled by the quota first.
  // Either error names the flag that sets both bounds.
  EXPECT_THAT(ReadFile(out + "/events.jsonl"),
              ContainsRegex("RESOURCE_EXHAUSTED: [^\"]*(a reply over|2 x) --max_receive_mb=1"));
  // The quota is 64 MiB here (2 x 1, at least 64); gRPC reclaims after the
  // fact, so the peak passes it by up to a few reads per connection.
  if (kRssMeansHeap) {
    EXPECT_LT(peak, 320 * 1024);
  }
}

// Replies under the bound, one at a time: each call succeeds, and no slot
// keeps its 48 MiB body afterwards.
TEST(ReceiveQuota, RepliesUnderTheBoundAreNotKeptPerSlot) {
  HugeReplies service(48, /*one_at_a_time=*/true);
  const std::string out = Tmp("receive_paced");
  const long peak = LoadgenPeakKb(&service, "64", out);
  EXPECT_THAT(ReadFile(out + "/events.jsonl"), Not(HasSubstr("RESOURCE_EXHAUSTED")));
  // A few replies in flight (each in gRPC's buffers, then parsed): ~380
  // MiB; kept per slot it was ~1 GiB.
  if (kRssMeansHeap) {
    EXPECT_LT(peak, 640 * 1024);
  }
}

}  // namespace
