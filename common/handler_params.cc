#include "common/handler_params.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rsslab {

absl::StatusOr<std::map<std::string, std::string>> ParseHandlerParams(absl::string_view text) {
  std::map<std::string, std::string> out;
  if (text.empty()) return out;
  for (absl::string_view kv : absl::StrSplit(text, ',')) {
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", kv, "' is not key=value"));
    }
    out[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  return out;
}

}  // namespace rsslab
