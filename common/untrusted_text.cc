#include "common/untrusted_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rsslab {

namespace {

// Length of the valid UTF-8 sequence starting at s[i] (within the first n
// bytes), or 0: stray continuation bytes, overlongs, surrogates and cut
// sequences are not text, and a status message must stay valid UTF-8.
size_t Utf8SequenceAt(absl::string_view s, size_t i, size_t n) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return len;
}

// Code points that are valid UTF-8 but change how the text around them is
// shown without showing themselves: C1 controls, the bidirectional marks,
// embeddings, overrides and isolates (a thread named "\u202egnp.exe" reads
// "exe.png"), and the line and paragraph separators.
bool IsInvisibleControl(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || cp == 0x061C || cp == 0x200E || cp == 0x200F ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// The code point of a valid sequence of `len` bytes at p.
char32_t DecodeUtf8(const char* p, size_t len) {
  const auto b = [p](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(p[k])); };
  if (len == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (len == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

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
    } else if (c >= 0x80) {
      const size_t len = Utf8SequenceAt(s, i, n);
      if (len == 0) {
        absl::StrAppendFormat(&out, "\\x%02x", c);
      } else if (const char32_t cp = DecodeUtf8(s.data() + i, len); IsInvisibleControl(cp)) {
        absl::StrAppendFormat(&out, "\\u%04x", static_cast<uint32_t>(cp));
        i += len - 1;
      } else {
        out.append(s.data() + i, len);
        i += len - 1;
      }
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (s.size() > max_bytes) absl::StrAppend(&out, "... (", s.size(), " bytes)");
  return out;
}

}  // namespace

std::string JsonInvisibleEscaped(absl::string_view json) {
  std::string out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const size_t len = static_cast<unsigned char>(json[i]) < 0x80
                           ? 0
                           : Utf8SequenceAt(json, i, json.size());
    if (len == 0) {
      out.push_back(json[i]);
      continue;
    }
    const char32_t cp = DecodeUtf8(json.data() + i, len);
    if (IsInvisibleControl(cp)) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<uint32_t>(cp));
    } else {
      out.append(json.data() + i, len);
    }
    i += len - 1;
  }
  return out;
}

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceAt(s, i, s.size());
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string ValidUtf8(absl::string_view s) {
  if (IsValidUtf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(s[i]);
      continue;
    }
    const size_t len = Utf8SequenceAt(s, i, s.size());
    if (len == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
    } else {
      out.append(s.data() + i, len);
      i += len - 1;
    }
  }
  return out;
}

std::string Echo(absl::string_view s, size_t max_bytes) { return EchoImpl(s, max_bytes, false); }

std::string EchoMultiline(absl::string_view s, size_t max_bytes) {
  return EchoImpl(s, max_bytes, true);
}

}  // namespace rsslab
