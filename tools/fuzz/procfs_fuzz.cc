// libFuzzer target: the /proc parsers (status, smaps, maps, environ) must
// never crash or hang on arbitrary text. Run via tools/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/snapshot.pb.h"
#include "common/procfs/procfs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  rsslab::v1::ProcStatus status;
  (void)rsslab::procfs::ParseStatus(text, &status);
  rsslab::v1::MemoryMap map;
  rsslab::procfs::ClassifySmaps(text, 4, &map);
  (void)rsslab::procfs::DetectAllocator(text);
  (void)rsslab::procfs::IsMapped(text, "libjemalloc");
  auto env = rsslab::procfs::ParseEnviron(text);
  (void)rsslab::procfs::AllocatorEnv(env);
  return 0;
}
