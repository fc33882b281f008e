#include "tests/clients.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rsslab {
namespace testing {
namespace {

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

}  // namespace

Clients::Clients(ServerProcess* s) : Clients(s->data_address(), s->control_address()) {}

Clients::Clients(const std::string& data_address, const std::string& control_address)
    : load(rsslab::v1::Load::NewStub(
          grpc::CreateChannel(data_address, grpc::InsecureChannelCredentials()))),
      control(rsslab::v1::Control::NewStub(
          grpc::CreateChannel(control_address, grpc::InsecureChannelCredentials()))) {}

grpc::Status Clients::Handle(const rsslab::v1::HandleRequest& req,
                             rsslab::v1::HandleResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  return load->Handle(&ctx, req, resp);
}

grpc::Status Clients::Handle(uint64_t seed, const Params& params,
                             rsslab::v1::HandleResponse* resp) {
  rsslab::v1::HandleRequest req;
  req.set_id(seed);
  req.set_seed(seed);
  for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
  rsslab::v1::HandleResponse ignored;
  return Handle(req, resp != nullptr ? resp : &ignored);
}

int Clients::Drive(int n, int threads, uint64_t seed0,
                   const std::function<Params(int)>& params) {
  std::atomic<int> next{0}, failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        if (!Handle(seed0 + i, params ? params(i) : Params{}).ok()) ++failed;
      }
    });
  }
  for (auto& t : ts) t.join();
  return failed.load();
}

grpc::Status Clients::SetPhase(const std::string& phase, rsslab::v1::SetPhaseResponse* resp,
                               int64_t limit, bool gc) {
  rsslab::v1::SetPhaseRequest req;
  req.set_phase(phase);
  req.set_gc(gc);
  if (limit != -1) req.set_cache_limit_bytes(limit);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  return control->SetPhase(&ctx, req, resp);
}

void Clients::Phase(const std::string& phase, bool gc) {
  rsslab::v1::SetPhaseResponse resp;
  grpc::Status s = SetPhase(phase, &resp, -1, gc);
  EXPECT_TRUE(s.ok()) << phase << ": " << s.error_message();
}

rsslab::v1::Snapshot Clients::Snapshot(bool gc) {
  rsslab::v1::SnapshotRequest req;
  req.set_gc(gc);
  rsslab::v1::Snapshot snap;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(30));
  grpc::Status s = control->GetSnapshot(&ctx, req, &snap);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return snap;
}

rsslab::v1::TrimResult Clients::Trim(rsslab::v1::TrimMode mode, bool gc) {
  rsslab::v1::TrimRequest req;
  req.set_mode(mode);
  req.set_gc(gc);
  rsslab::v1::TrimResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(In(60));
  grpc::Status s = control->Trim(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.trim();
}

}  // namespace testing
}  // namespace rsslab
