#include "server/python/knobs.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/echo.h"

namespace rsslab {
namespace {

// Strict UTF-8 (no overlongs, no surrogates, at most U+10FFFF), as CPython's
// decoder wants it: a handler's params become str objects.
bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

std::string FormatNumber(double v) { return absl::StrFormat("%.17g", v); }

}  // namespace

std::string Quote(absl::string_view s) { return Echo(s, 64); }

std::string KnobBound::Describe() const {
  switch (kind) {
    case Kind::kInt:
      return absl::StrCat("an integer between ", FormatNumber(lo), " and ", FormatNumber(hi));
    case Kind::kFloat:
      return absl::StrCat("a number between ", FormatNumber(lo), " and ", FormatNumber(hi));
    case Kind::kChoice:
      return absl::StrCat("one of ", absl::StrJoin(choices, ", "));
  }
  return "";
}

absl::Status CheckParam(const KnobTable& table, absl::string_view key, absl::string_view value) {
  if (key.empty()) return absl::InvalidArgumentError("a param has an empty name");
  if (key.size() > kMaxParamKeyBytes) {
    return absl::InvalidArgumentError(absl::StrCat("param name ", Quote(key), " is longer than ",
                                                   kMaxParamKeyBytes, " bytes"));
  }
  if (!ValidUtf8(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("param name ", Quote(key), " is not valid UTF-8"));
  }
  if (value.size() > kMaxParamValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("param ", key, " is longer than ",
                                                   kMaxParamValueBytes, " bytes (",
                                                   value.size(), ")"));
  }
  if (!ValidUtf8(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("param ", key, "=", Quote(value), " is not valid UTF-8"));
  }
  auto it = table.find(std::string(key));
  if (it == table.end()) return absl::OkStatus();
  const KnobBound& b = it->second;
  bool ok = false;
  switch (b.kind) {
    case KnobBound::Kind::kInt: {
      int64_t v;
      ok = absl::SimpleAtoi(value, &v) && static_cast<double>(v) >= b.lo &&
           static_cast<double>(v) <= b.hi;
      break;
    }
    case KnobBound::Kind::kFloat: {
      double v;
      // NaN fails both comparisons; infinities fail the finite check.
      ok = absl::SimpleAtod(value, &v) && std::isfinite(v) && v >= b.lo && v <= b.hi;
      break;
    }
    case KnobBound::Kind::kChoice:
      for (const std::string& c : b.choices) ok = ok || c == value;
      break;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("param ", key, "=", Quote(value),
                                                 " is out of range: must be ", b.Describe(),
                                                 " (the handler's KNOBS)"));
}

namespace {
template <typename M>
absl::Status CheckAll(const KnobTable& table, const M& params) {
  if (params.size() > kMaxParams) {
    return absl::InvalidArgumentError(
        absl::StrCat("a request may carry at most ", kMaxParams, " params; got ", params.size()));
  }
  for (const auto& kv : params) {
    if (absl::Status s = CheckParam(table, kv.first, kv.second); !s.ok()) return s;
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status CheckParams(const KnobTable& table,
                         const google::protobuf::Map<std::string, std::string>& params) {
  return CheckAll(table, params);
}

absl::Status CheckParams(const KnobTable& table, const std::map<std::string, std::string>& params) {
  return CheckAll(table, params);
}

}  // namespace rsslab
