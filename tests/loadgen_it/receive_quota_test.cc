// A hostile peer's huge replies cannot take the loadgen's memory: gRPC 1.51
// assembles each reply whole before --max_receive_mb rejects it, so without
// the process's resource quota 16 calls of 64 MiB replies held ~1 GiB. The
// peer is in this process, on loopback; the loadgen is the real binary.

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
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

// Answers every call with the same HandleResponse whose body is `mb` MiB,
// one shared buffer sent without copies (the peer stays small and fast).
class HugeReplies : public grpc::CallbackGenericService {
 public:
  explicit HugeReplies(int mb) {
    const size_t n = static_cast<size_t>(mb) << 20;
    wire_ = "\x22";  // field 4 (body), length-delimited
    for (size_t v = n; ; v >>= 7) {
      if (v < 0x80) { wire_.push_back(static_cast<char>(v)); break; }
      wire_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    }
    wire_.append(n, 'x');
  }

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor : public grpc::ServerGenericBidiReactor {
     public:
      explicit Reactor(const std::string& wire) {
        grpc::Slice s(wire.data(), wire.size(), grpc::Slice::STATIC_SLICE);
        reply_ = grpc::ByteBuffer(&s, 1);
        StartRead(&request_);
      }
      void OnReadDone(bool ok) override {
        if (ok) {
          StartWriteAndFinish(&reply_, grpc::WriteOptions(), grpc::Status::OK);
        } else {
          Finish(grpc::Status(grpc::StatusCode::CANCELLED, "no request"));
        }
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer request_, reply_;
    };
    return new Reactor(wire_);
  }

 private:
  std::string wire_;
};

TEST(ReceiveQuota, HugeRepliesAtConcurrency16KeepTheLoadgenUnder320MiB) {
  HugeReplies service(64);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterCallbackGenericService(&service);
  b.SetMaxSendMessageSize(-1);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);

  const std::string out = Tmp("receive_quota");
  Child lg(Loadgen(), {absl::StrCat("--target=127.0.0.1:", port), "--control=",
                       "--concurrency=16", "--channels=16", "--requests=32", "--return_body",
                       "--max_receive_mb=1", "--max_errors=100000", "--deadline_ms=30000",
                       "--progress=none", "--out=" + out});
  const int rc = lg.Wait(absl::Seconds(120));
  server->Shutdown(std::chrono::system_clock::now());
  EXPECT_EQ(rc, 0) << lg.Stderr();  // failures under --max_errors end nothing
  // The calls failed: over the bound, or cancelled by the quota first.
  // Either error names the flag that sets both bounds.
  EXPECT_THAT(ReadFile(out + "/events.jsonl"),
              ContainsRegex("RESOURCE_EXHAUSTED: [^\"]*(a reply over|2 x) --max_receive_mb=1"));
  // The quota is 64 MiB here (2 x 1, at least 64); gRPC reclaims after the
  // fact, so the peak passes it by up to a few reads per connection.
  EXPECT_GT(lg.max_rss_kb(), 0);
  EXPECT_LT(lg.max_rss_kb(), 320 * 1024) << lg.Stderr();
  std::printf("loadgen peak RSS: %ld KiB\n", lg.max_rss_kb());
}

}  // namespace
