// The data plane (rsslab.v1.Load) over the callback API: gRPC's threads only
// hand each call to the worker pool and never run Python.
//
// Handle is registered raw (bytes in, bytes out) and parses the request
// itself, with the same zero-copy reader gRPC uses: a request that does not
// parse (for example a param name that is not UTF-8, which proto3 refuses)
// then gets INVALID_ARGUMENT with a sentence, where gRPC's own handler
// answers UNIMPLEMENTED with an empty message (issue 14).

#ifndef RSSLAB_SERVER_LOAD_SERVICE_H_
#define RSSLAB_SERVER_LOAD_SERVICE_H_

#include "proto/load.grpc.pb.h"
#include "common/auth.h"
#include "server/core.h"

namespace rsslab {

class LoadService final
    : public rsslab::v1::Load::WithRawCallbackMethod_Handle<rsslab::v1::Load::CallbackService> {
 public:
  // `security` checks the caller's token (when one is configured).
  LoadService(ServerCore* core, const Security* security) : core_(core), security_(security) {}

  grpc::ServerUnaryReactor* Handle(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;

 private:
  ServerCore* const core_;
  const Security* const security_;
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_LOAD_SERVICE_H_
