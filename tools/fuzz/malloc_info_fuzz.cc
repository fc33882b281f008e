// libFuzzer target: glibc malloc_info XML parser. Run via tools/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "proto/snapshot.pb.h"
#include "memory/alloc/alloc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rsslab::v1::GlibcStats stats;
  (void)rsslab::alloc::ParseMallocInfo(
      absl::string_view(reinterpret_cast<const char*>(data), size), &stats);
  return 0;
}
