#include "control/service/control_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"

namespace rsslab {

grpc::Status ControlService::StreamedSetPhase(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<rsslab::v1::SetPhaseRequest, rsslab::v1::SetPhaseResponse>* stream) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::SetPhaseRequest request;
  // A unary call carries exactly one message: Read fails when it does not
  // parse, or when the client has gone (then nobody reads the answer).
  if (!stream->Read(&request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the request does not parse as rsslab.v1.SetPhaseRequest: the phase is not "
                        "valid UTF-8, or the bytes are not a SetPhaseRequest");
  }
  rsslab::v1::SetPhaseResponse response;
  grpc::Status status = ToGrpc(core_->SetPhase(
      request, &response,
      PythonDeadline(absl::FromChrono(context->deadline()), ControlSnapshotOptions().python_deadline)));
  if (status.ok() && !stream->Write(response)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before the answer");
  }
  return status;
}

namespace {

grpc::Status Unparsed(absl::string_view type) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("the request does not parse as rsslab.v1.", type));
}

}  // namespace

grpc::Status ControlService::StreamedGetSnapshot(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<rsslab::v1::SnapshotRequest, rsslab::v1::Snapshot>* stream) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::SnapshotRequest request;
  if (!stream->Read(&request)) return Unparsed("SnapshotRequest");
  ControlSnapshotOptions o;
  o.gc = request.gc();
  o.detail = request.detail();
  o.python_deadline = PythonDeadline(absl::FromChrono(context->deadline()), o.python_deadline);
  rsslab::v1::Snapshot response;
  core_->TakeSnapshot(o, &response);
  if (!stream->Write(response)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before the answer");
  }
  return grpc::Status::OK;
}

grpc::Status ControlService::StreamedWatchSnapshots(
    grpc::ServerContext* context,
    grpc::ServerSplitStreamer<rsslab::v1::WatchRequest, rsslab::v1::Snapshot>* writer) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::WatchRequest req;
  if (!writer->Read(&req)) return Unparsed("WatchRequest");
  const rsslab::v1::WatchRequest* request = &req;
  int64_t interval_ms = request->interval_ms() == 0 ? 1000 : request->interval_ms();
  if (interval_ms < 10 || interval_ms > 24 * 3600 * 1000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("interval_ms must be between 10 and 86400000 (a day); got ",
                                     request->interval_ms()));
  }
  if (watch_streams_.fetch_add(1) >= max_watch_streams_) {
    watch_streams_.fetch_sub(1);
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("too many WatchSnapshots streams (limit ",
                                     max_watch_streams_, ", --max_watch_streams)"));
  }
  ControlSnapshotOptions o;
  o.gc = request->gc();
  o.detail = request->detail();
  uint32_t sent = 0;
  absl::Time next = absl::Now();
  while (!context->IsCancelled() && !stopping_.load()) {
    rsslab::v1::Snapshot snap;
    core_->TakeSnapshot(o, &snap);
    if (!writer->Write(snap)) break;  // client went away
    if (request->max_count() > 0 && ++sent >= request->max_count()) break;
    next += absl::Milliseconds(interval_ms);
    // Sleep in short steps so a cancelled client or shutdown ends the
    // stream promptly.
    while (absl::Now() < next && !context->IsCancelled() && !stopping_.load()) {
      absl::SleepFor(std::min(absl::Milliseconds(50), next - absl::Now()));
    }
  }
  watch_streams_.fetch_sub(1);
  return grpc::Status::OK;
}

grpc::Status ControlService::StreamedTrim(
    grpc::ServerContext* context,
    grpc::ServerUnaryStreamer<rsslab::v1::TrimRequest, rsslab::v1::TrimResponse>* stream) {
  if (grpc::Status a = security_->Authorize(*context); !a.ok()) return a;
  rsslab::v1::TrimRequest request;
  if (!stream->Read(&request)) return Unparsed("TrimRequest");
  rsslab::v1::TrimResponse response;
  grpc::Status status = ToGrpc(core_->Trim(
      request, &response,
      PythonDeadline(absl::FromChrono(context->deadline()), ControlSnapshotOptions().python_deadline)));
  if (status.ok() && !stream->Write(response)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away before the answer");
  }
  return status;
}

}  // namespace rsslab
