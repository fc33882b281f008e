#include "server/load_service.h"

#include "common/grpc_status.h"

namespace rsslab {

grpc::ServerUnaryReactor* LoadService::Handle(grpc::CallbackServerContext* context,
                                              const rsslab::v1::HandleRequest* request,
                                              rsslab::v1::HandleResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status auth = security_->Authorize(*context);
  if (!auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  core_->Submit(
      request, response, [context] { return context->IsCancelled(); },
      [reactor](const absl::Status& s) { reactor->Finish(ToGrpc(s)); });
  return reactor;
}

}  // namespace rsslab
