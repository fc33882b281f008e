#include "server/load_service.h"

#include <memory>

#include "common/grpc_status.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"

namespace rsslab {
namespace {

// One call's messages, alive from the parse until the answer is written.
struct Call {
  rsslab::v1::HandleRequest request;
  rsslab::v1::HandleResponse response;
};

}  // namespace

grpc::ServerUnaryReactor* LoadService::Handle(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  grpc::Status auth = security_->Authorize(*context);
  if (!auth.ok()) {
    reactor->Finish(auth);
    return reactor;
  }
  auto call = std::make_unique<Call>();
  // The reader only reads; it wants a mutable pointer for its slice walk.
  grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(request));
  if (!call->request.ParseFromZeroCopyStream(&reader)) {
    reactor->Finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "the request does not parse as rsslab.v1.HandleRequest: a string (a param name or "
        "value) is not valid UTF-8, or the bytes are not a HandleRequest"));
    return reactor;
  }
  Call* c = call.release();
  core_->Submit(
      &c->request, &c->response, [context] { return context->IsCancelled(); },
      [reactor, c, response](const absl::Status& s) {
        grpc::Status status = ToGrpc(s);
        if (s.ok()) {
          bool own = false;
          grpc::Status ser = grpc::GenericSerialize<grpc::ProtoBufferWriter,
                                                    rsslab::v1::HandleResponse>(c->response,
                                                                                response, &own);
          if (!ser.ok()) status = ser;
        }
        delete c;
        reactor->Finish(status);
      });
  return reactor;
}

}  // namespace rsslab
