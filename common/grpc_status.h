// absl::Status -> grpc::Status, keeping the code and the message (the two
// enums share their numeric values). One way only: nothing here reads gRPC
// statuses back into absl.
//
// Usage:
//   return rsslab::ToGrpc(core->SetPhase(*request, response));

#ifndef RSSLAB_COMMON_GRPC_STATUS_H_
#define RSSLAB_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace rsslab {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace rsslab

#endif  // RSSLAB_COMMON_GRPC_STATUS_H_
