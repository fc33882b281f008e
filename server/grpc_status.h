// absl::Status <-> grpc::Status, keeping code and message.

#ifndef RSSLAB_SERVER_GRPC_STATUS_H_
#define RSSLAB_SERVER_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace rsslab {

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace rsslab

#endif  // RSSLAB_SERVER_GRPC_STATUS_H_
