// libFuzzer target: scenario files (text format + validation). Run via
// tools/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "loadgen/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rsslab::v1::LoadSpec flags;
  (void)rsslab::ParseScenario(absl::string_view(reinterpret_cast<const char*>(data), size),
                              "fuzz", flags);
  return 0;
}
