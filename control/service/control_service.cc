#include "control/service/control_service.h"

#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace rsslab {

namespace {

grpc::Status Unparsed(absl::string_view type) {
  return ToGrpc(ControlCalls::UnparsedRequest(type));
}

grpc::Status Gone() {
  return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before the answer");
}

}  // namespace

// A unary call carries exactly one message: Read fails when it does not
// parse, or when the client has gone (then nobody reads the answer).
grpc::Status ControlService::StreamedSetPhase(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<rsslab::v1::SetPhaseRequest, rsslab::v1::SetPhaseResponse>* stream) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::SetPhaseRequest request;
  if (!stream->Read(&request)) return Unparsed("SetPhaseRequest");
  rsslab::v1::SetPhaseResponse response;
  grpc::Status status =
      ToGrpc(calls_.SetPhase(request, absl::FromChrono(context->deadline()), &response));
  if (status.ok() && !stream->Write(response)) return Gone();
  return status;
}

grpc::Status ControlService::StreamedGetSnapshot(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<rsslab::v1::SnapshotRequest, rsslab::v1::Snapshot>* stream) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::SnapshotRequest request;
  if (!stream->Read(&request)) return Unparsed("SnapshotRequest");
  rsslab::v1::Snapshot response;
  calls_.GetSnapshot(request, absl::FromChrono(context->deadline()), &response);
  if (!stream->Write(response)) return Gone();
  return grpc::Status::OK;
}

grpc::Status ControlService::StreamedWatchSnapshots(
    grpc::ServerContext* context,
    grpc::ServerSplitStreamer<rsslab::v1::WatchRequest, rsslab::v1::Snapshot>* writer) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::WatchRequest request;
  if (!writer->Read(&request)) return Unparsed("WatchRequest");
  absl::StatusOr<std::unique_ptr<ControlCalls::Watch>> watch = calls_.OpenWatch(request);
  if (!watch.ok()) return ToGrpc(watch.status());
  rsslab::v1::Snapshot snap;
  while ((*watch)->Next(&snap, [context] { return context->IsCancelled(); })) {
    if (!writer->Write(snap)) break;  // client went away
    snap.Clear();
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::StreamedTrim(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<rsslab::v1::TrimRequest, rsslab::v1::TrimResponse>* stream) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::TrimRequest request;
  if (!stream->Read(&request)) return Unparsed("TrimRequest");
  rsslab::v1::TrimResponse response;
  grpc::Status status =
      ToGrpc(calls_.Trim(request, absl::FromChrono(context->deadline()), &response));
  if (status.ok() && !stream->Write(response)) return Gone();
  return status;
}

}  // namespace rsslab
