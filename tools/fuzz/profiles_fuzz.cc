// libFuzzer target: allocator profile files. Run via tools/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "agent/profiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rsslab::profiles::ParseOptions o;
  o.check_files = false;  // no file system access from fuzzed input
  (void)rsslab::profiles::ParseProfiles(
      absl::string_view(reinterpret_cast<const char*>(data), size), "fuzz", o);
  return 0;
}
