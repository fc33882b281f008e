#include "loadgen/status_code.h"

#include "absl/strings/match.h"
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

std::string CallErrorText(int code, absl::string_view message, int max_receive_mb) {
  std::string text = absl::StrCat(StatusCodeName(code), ": ", message);
  constexpr int kResourceExhausted = 8;
  if (code == kResourceExhausted &&
      absl::StartsWith(message, "Received message larger than max")) {
    absl::StrAppend(&text, ": a reply over --max_receive_mb=", max_receive_mb,
                    " (raise it to accept larger replies)");
  } else if (code == kResourceExhausted && absl::StartsWith(message, "Buffers full")) {
    // gRPC's resource quota cancelled a call (receive_bound.h).
    absl::StrAppend(&text, ": the replies in flight passed the loadgen's memory quota (",
                    ReceiveQuotaMb(max_receive_mb), " MiB: 2 x --max_receive_mb=",
                    max_receive_mb, ", at least ", kMinReceiveQuotaMb, ")");
  }
  return text;
}

}  // namespace rsslab
