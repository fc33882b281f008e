// Handler params written as "key=value,key=value" (server --handler_params,
// loadgen --params, the agent's allowlisted handler_params flag).
//
// Example:
//   absl::StatusOr<std::map<std::string, std::string>> p =
//       ParseHandlerParams("median=4096,sigma=1.5");
//   // p->at("sigma") == "1.5"; "" parses to an empty map.

#ifndef RSSLAB_COMMON_HANDLER_PARAMS_H_
#define RSSLAB_COMMON_HANDLER_PARAMS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

// Every item must be key=value with a non-empty key; a value may contain
// '='. The error names the first bad item.
absl::StatusOr<std::map<std::string, std::string>> ParseHandlerParams(absl::string_view text);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_HANDLER_PARAMS_H_
