// gRPC status code names, shared by the engine's summaries and the
// loadgen's Prometheus labels.
//
//   StatusCodeName(14)  // "UNAVAILABLE"

#ifndef RSSLAB_LOADGEN_STATUS_CODE_H_
#define RSSLAB_LOADGEN_STATUS_CODE_H_

#include <string>

namespace rsslab {

// grpc::StatusCode OK..UNAUTHENTICATED.
inline constexpr int kStatusCodes = 17;

// "OK", "UNAVAILABLE", ... for a grpc::StatusCode value; "CODE_<n>" past
// the known ones.
std::string StatusCodeName(int code);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_STATUS_CODE_H_
