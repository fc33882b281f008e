// The control plane (rsslab.v1.Control), on its own port. Synchronous API:
// calls are rare and some (WatchSnapshots) are long-lived streams.

#ifndef RSSLAB_CONTROL_SERVICE_CONTROL_SERVICE_H_
#define RSSLAB_CONTROL_SERVICE_CONTROL_SERVICE_H_

#include <atomic>

#include "proto/control.grpc.pb.h"
#include "common/auth.h"
#include "control/service/control_backend.h"

namespace rsslab {

// SetPhase is a streamed unary method: it reads its own request, so one that
// does not parse (a phase that is not UTF-8, which proto3 refuses) gets
// INVALID_ARGUMENT with a sentence, where gRPC's own parse answers INTERNAL
// with an empty message. The other requests carry no strings.
class ControlService final
    : public rsslab::v1::Control::WithStreamedUnaryMethod_SetPhase<rsslab::v1::Control::Service> {
 public:
  // `security` checks the caller's token (when one is configured) before
  // anything changes.
  ControlService(ControlBackend* core, int max_watch_streams, const Security* security)
      : core_(core), max_watch_streams_(max_watch_streams), security_(security) {}

  grpc::Status StreamedSetPhase(
      grpc::ServerContext* context,
      grpc::ServerUnaryStreamer<rsslab::v1::SetPhaseRequest, rsslab::v1::SetPhaseResponse>* stream)
      override;
  grpc::Status GetSnapshot(grpc::ServerContext* context,
                           const rsslab::v1::SnapshotRequest* request,
                           rsslab::v1::Snapshot* response) override;
  grpc::Status WatchSnapshots(grpc::ServerContext* context,
                              const rsslab::v1::WatchRequest* request,
                              grpc::ServerWriter<rsslab::v1::Snapshot>* writer) override;
  grpc::Status Trim(grpc::ServerContext* context, const rsslab::v1::TrimRequest* request,
                    rsslab::v1::TrimResponse* response) override;

  // Ends every watch stream promptly (server shutdown).
  void StopWatches() { stopping_.store(true); }

 private:
  ControlBackend* const core_;
  const int max_watch_streams_;
  const Security* const security_;
  std::atomic<int> watch_streams_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_SERVICE_CONTROL_SERVICE_H_
