// libFuzzer target: the data plane's request -> handler params path, as the
// server runs it before a worker or the handler is involved: bytes parsed
// as rsslab.v1.HandleRequest (LoadService::Handle), then the params checked
// against a handler's declared KNOBS and the generic limits (CheckParams).
// Properties: no crash, no sanitizer report, an accepted request is within
// the generic limits, and an error never echoes more than a bounded amount
// of the input. Run via tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "proto/load.pb.h"
#include "server/python/knobs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rsslab::KnobTable* table = [] {
    auto* t = new rsslab::KnobTable;
    (*t)["median"] = rsslab::KnobBound::Float(1, 8388608);
    (*t)["sigma"] = rsslab::KnobBound::Float(0, 4);
    (*t)["cap"] = rsslab::KnobBound::Int(1, 8388608);
    (*t)["store_p"] = rsslab::KnobBound::Float(0, 1);
    (*t)["dict_items"] = rsslab::KnobBound::Int(0, 20000);
    (*t)["dict_shape"] = rsslab::KnobBound::Choice({"flat", "nested"});
    return t;
  }();
  rsslab::v1::HandleRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::Status s = rsslab::CheckParams(*table, req.params());
  if (s.ok()) {
    if (req.params().size() > rsslab::kMaxParams) abort();
    for (const auto& [k, v] : req.params()) {
      if (k.empty() || k.size() > rsslab::kMaxParamKeyBytes || v.size() > rsslab::kMaxParamValueBytes) {
        abort();
      }
    }
  } else if (s.message().size() > 2048) {
    abort();  // the input echoed back
  }
  return 0;
}
