// The control plane (rsslab.v1.Control), on its own port. Synchronous API:
// calls are rare and some (WatchSnapshots) are long-lived streams.

#ifndef RSSLAB_CONTROL_SERVICE_CONTROL_SERVICE_H_
#define RSSLAB_CONTROL_SERVICE_CONTROL_SERVICE_H_

#include "proto/control.grpc.pb.h"
#include "common/auth.h"
#include "control/service/control_backend.h"
#include "control/service/control_calls.h"

namespace rsslab {

// Every method is streamed (StreamedService): the handler runs once the
// call's metadata has arrived and reads the request itself, after the token
// check. gRPC 1.51 buffers a whole message before its size limit applies,
// so a method that let gRPC read first would take an unauthenticated
// client's 1,000 MiB request in full before refusing it; here the request of
// an unauthorized call is never read. It also means a request that does not
// parse (a phase that is not UTF-8, which proto3 refuses) gets
// INVALID_ARGUMENT with a sentence, where gRPC's own parse answers INTERNAL
// with an empty message.
class ControlService final : public rsslab::v1::Control::StreamedService {
 public:
  // `security` checks the caller's token (when one is configured) before
  // anything is read or changed.
  ControlService(ControlBackend* core, int max_watch_streams, const Security* security)
      : calls_(core, max_watch_streams), security_(security) {}

  grpc::Status StreamedSetPhase(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<rsslab::v1::SetPhaseRequest, rsslab::v1::SetPhaseResponse>* stream)
      override;
  grpc::Status StreamedGetSnapshot(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<rsslab::v1::SnapshotRequest, rsslab::v1::Snapshot>* stream)
      override;
  grpc::Status StreamedWatchSnapshots(
      grpc::ServerContext* context,
      grpc::ServerSplitStreamer<rsslab::v1::WatchRequest, rsslab::v1::Snapshot>* stream) override;
  grpc::Status StreamedTrim(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<rsslab::v1::TrimRequest, rsslab::v1::TrimResponse>* stream)
      override;

  // Ends every watch stream promptly (server shutdown).
  void StopWatches() { calls_.StopWatches(); }

 private:
  ControlCalls calls_;  // the rules; this class is the gRPC C++ transport
  const Security* const security_;
};

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_SERVICE_CONTROL_SERVICE_H_
