#include "tests/clients.h"

#include <chrono>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace testing {

Clients::Clients(ServerProcess* s)
    : load(rsslab::v1::Load::NewStub(
          grpc::CreateChannel(s->data_address(), grpc::InsecureChannelCredentials()))),
      control(rsslab::v1::Control::NewStub(
          grpc::CreateChannel(s->control_address(), grpc::InsecureChannelCredentials()))) {}

void Clients::Phase(const std::string& phase, bool gc) {
  rsslab::v1::SetPhaseRequest req;
  req.set_phase(phase);
  req.set_gc(gc);
  rsslab::v1::SetPhaseResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = control->SetPhase(&ctx, req, &resp);
  EXPECT_TRUE(s.ok()) << phase << ": " << s.error_message();
}

rsslab::v1::Snapshot Clients::Snapshot() {
  rsslab::v1::Snapshot snap;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status s = control->GetSnapshot(&ctx, rsslab::v1::SnapshotRequest(), &snap);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return snap;
}

}  // namespace testing
}  // namespace rsslab
