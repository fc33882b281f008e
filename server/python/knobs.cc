#include "server/python/knobs.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace {

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
  if (!IsValidUtf8(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("param name ", Quote(key), " is not valid UTF-8"));
  }
  if (value.size() > kMaxParamValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("param ", key, " is longer than ",
                                                   kMaxParamValueBytes, " bytes (",
                                                   value.size(), ")"));
  }
  if (!IsValidUtf8(value)) {
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
