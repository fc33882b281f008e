// The data plane (rsslab.v1.Load) over the callback API: gRPC's threads only
// hand each call to the worker pool and never run Python.

#ifndef RSSLAB_SERVER_LOAD_SERVICE_H_
#define RSSLAB_SERVER_LOAD_SERVICE_H_

#include "proto/load.grpc.pb.h"
#include "common/auth.h"
#include "server/core.h"

namespace rsslab {

class LoadService final : public rsslab::v1::Load::CallbackService {
 public:
  // `security` checks the caller's token (when one is configured).
  LoadService(ServerCore* core, const Security* security) : core_(core), security_(security) {}

  grpc::ServerUnaryReactor* Handle(grpc::CallbackServerContext* context,
                                   const rsslab::v1::HandleRequest* request,
                                   rsslab::v1::HandleResponse* response) override;

 private:
  ServerCore* const core_;
  const Security* const security_;
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_LOAD_SERVICE_H_
