#include "loadgen/status_code.h"

#include "absl/strings/str_cat.h"

namespace rsslab {

std::string StatusCodeName(int code) {
  static constexpr const char* kNames[kStatusCodes] = {
      "OK",           "CANCELLED",         "UNKNOWN",
      "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS",   "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION", "ABORTED",       "OUT_OF_RANGE",
      "UNIMPLEMENTED",    "INTERNAL",          "UNAVAILABLE",
      "DATA_LOSS",        "UNAUTHENTICATED"};
  if (code >= 0 && code < kStatusCodes) return kNames[code];
  return absl::StrCat("CODE_", code);
}

}  // namespace rsslab
