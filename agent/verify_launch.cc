#include "agent/verify_launch.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"

namespace rsslab {
namespace launch {

absl::StatusOr<VerifiedLaunch> VerifyLaunch(pid_t pid, const v1::Profile& profile,
                                            absl::string_view ready_line,
                                            const Security* security,
                                            absl::Duration rpc_timeout) {
  absl::StatusOr<ReadyLine> ready = ParseReadyLine(ready_line);
  if (!ready.ok()) return absl::InternalError(ready.status().message());
  absl::StatusOr<profiles::Verification> v = profiles::VerifyProfile(pid, profile);
  if (!v.ok()) return absl::FailedPreconditionError(v.status().message());
  absl::StatusOr<std::string> reported =
      ReportedAllocator(ready->control_address, rpc_timeout, security);
  if (!reported.ok()) return absl::UnavailableError(reported.status().message());
  absl::Status cross = profiles::CheckReportedAllocator(profile, *reported);
  if (!cross.ok()) return absl::FailedPreconditionError(cross.message());
  return VerifiedLaunch{*std::move(ready), *std::move(v)};
}

absl::StatusOr<std::string> ReportedAllocator(const std::string& control_address,
                                              absl::Duration timeout, const Security* security) {
  auto channel = security != nullptr
                     ? security->Channel(control_address)
                     : grpc::CreateChannel(control_address, grpc::InsecureChannelCredentials());
  auto stub = rsslab::v1::Control::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  rsslab::v1::SnapshotRequest req;
  rsslab::v1::Snapshot snap;
  grpc::Status s = stub->GetSnapshot(&ctx, req, &snap);
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("GetSnapshot from ", control_address, ": ",
                                               s.error_message()));
  }
  return snap.allocator();
}

}  // namespace launch
}  // namespace rsslab
