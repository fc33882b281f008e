// libFuzzer target: the /proc parsers (status, smaps, maps, environ, a
// thread's stat line, CPU lists, status fields, mapped paths) must
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
  rsslab::procfs::ThreadView t;
  (void)rsslab::procfs::ParseThreadStat(text, &t);
  (void)rsslab::procfs::CountCpuList(text);
  (void)rsslab::procfs::StatusField(text, "Cpus_allowed_list");
  (void)rsslab::procfs::MappedPath(text, "_rsslab", ".so");
  return 0;
}
