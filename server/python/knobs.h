// Declared bounds of a handler's knobs, checked before the handler runs.
//
// A handler module may declare, next to handle(), a table of the params it
// reads and the values each may take:
//
//   KNOBS = {
//       "median": (1.0, 8388608.0),      # a float in [lo, hi]
//       "dict_items": (0, 20000),        # both bounds ints: an integer in [lo, hi]
//       "dict_shape": ("flat", "nested"),  # strings: one of them
//   }
//
// The server reads it once at import (PythonRuntime) and then refuses, with
// INVALID_ARGUMENT and without taking a worker or the GIL, any request whose
// params break it; the server's own --handler_params are checked the same
// way at start. Params the table does not name are passed through (a
// handler ignores what it does not read). Whatever the table says, every
// request is held to the generic limits below, so no params map can be
// large. Pure C++ (no Python): the fuzz target tools/fuzz/request_params_fuzz.cc
// drives it with arbitrary HandleRequest bytes.
//
//   KnobTable t;
//   t["dict_items"] = KnobBound::Int(0, 20000);
//   absl::Status s = CheckParams(t, request.params());
//   // "param dict_items=1000000000 is out of range: must be an integer between 0 and 20000"

#ifndef RSSLAB_SERVER_PYTHON_KNOBS_H_
#define RSSLAB_SERVER_PYTHON_KNOBS_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/map.h"

namespace rsslab {

// Generic limits on every request's params, whatever the handler declares.
inline constexpr size_t kMaxParams = 64;
inline constexpr size_t kMaxParamKeyBytes = 128;
inline constexpr size_t kMaxParamValueBytes = 1024;

struct KnobBound {
  enum class Kind { kInt, kFloat, kChoice };
  Kind kind = Kind::kFloat;
  double lo = 0;
  double hi = 0;
  std::vector<std::string> choices;

  static KnobBound Int(double lo, double hi) { return {Kind::kInt, lo, hi, {}}; }
  static KnobBound Float(double lo, double hi) { return {Kind::kFloat, lo, hi, {}}; }
  static KnobBound Choice(std::vector<std::string> c) { return {Kind::kChoice, 0, 0, std::move(c)}; }
  // "an integer between 0 and 20000", "one of flat, nested".
  std::string Describe() const;
};

using KnobTable = std::map<std::string, KnobBound>;

// One param: key and value are valid UTF-8 and within the generic limits;
// when the table names the key, the value satisfies its bound.
absl::Status CheckParam(const KnobTable& table, absl::string_view key, absl::string_view value);

// Every param of a request (and the count limit).
absl::Status CheckParams(const KnobTable& table,
                         const google::protobuf::Map<std::string, std::string>& params);
absl::Status CheckParams(const KnobTable& table, const std::map<std::string, std::string>& params);

// A value for an error message: at most 64 bytes, non-printable bytes as
// \xNN, so a 3 MB or binary input is never echoed back whole.
std::string Quote(absl::string_view s);

}  // namespace rsslab

#endif  // RSSLAB_SERVER_PYTHON_KNOBS_H_
