#include "common/echo.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rsslab {

namespace {

std::string EchoImpl(absl::string_view s, size_t max_bytes, bool keep_lf) {
  std::string out;
  const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(n + 32);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out.append(keep_lf ? "\n" : "\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c == '\\') {
      out.append("\\\\");
    } else if (c < 0x20 || c == 0x7F) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > max_bytes) absl::StrAppend(&out, "... (", s.size(), " bytes)");
  return out;
}

}  // namespace

std::string Echo(absl::string_view s, size_t max_bytes) { return EchoImpl(s, max_bytes, false); }

std::string EchoMultiline(absl::string_view s, size_t max_bytes) {
  return EchoImpl(s, max_bytes, true);
}

}  // namespace rsslab
