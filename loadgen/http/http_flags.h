// The loadgen's HTTP flags: --target=http://HOST:PORT/PATH selects HTTP load;
// --http_version, --connections, --method, --header, --body, --requests_file
// and --follow_redirects shape it.
//
//   rsslab::v1::LoadSpec flags = ...;                  // the command line's load layer
//   absl::Status s = rsslab::http::ApplyHttpFlags(target, &flags);  // --connections
//   absl::StatusOr<std::shared_ptr<const rsslab::http::Target>> t =
//       rsslab::http::LoadHttpFlags(target, argv);   // null: a gRPC --target
#ifndef RSSLAB_LOADGEN_HTTP_HTTP_FLAGS_H_
#define RSSLAB_LOADGEN_HTTP_HTTP_FLAGS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "loadgen/http/http_target.h"
#include "proto/scenario.pb.h"

namespace rsslab {
namespace http {

// --connections into the flag layer's channels; on HTTP/1.1 a closed loop's
// --concurrency defaults to the connections (one request in flight on
// each). INVALID_ARGUMENT when an HTTP flag comes without an http://
// --target, or --connections with --channels.
absl::Status ApplyHttpFlags(const std::string& target, rsslab::v1::LoadSpec* flags);

// The HTTP target, requests compiled and checked (every repeatable --header
// from `argv`); null when `target` is not an http:// URL. INVALID_ARGUMENT
// naming the flag, or FILE:LINE of --requests_file.
absl::StatusOr<std::shared_ptr<const Target>> LoadHttpFlags(const std::string& target,
                                                            const std::vector<std::string>& argv);

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_HTTP_FLAGS_H_
