// The process gauges every rsslab exporter shares (the server's
// --metrics_listen and `rsslab_ctl inspect --metrics_listen`): the same names
// and meanings, whichever process they describe.
//
// Example:
//   Exposition e;
//   ProcessGauges(snapshot.status(), snapshot.memory_map(), snapshot.allocator(),
//                 snapshot.allocator_library(), &e);
//   // rsslab_process_resident_memory_bytes, rsslab_glibc_arenas, ...
#ifndef RSSLAB_COMMON_METRICS_PROCESS_GAUGES_H_
#define RSSLAB_COMMON_METRICS_PROCESS_GAUGES_H_

#include <string>

#include "common/metrics/exposition.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace metrics {

// rsslab_process_resident_memory_bytes, ..._max_bytes, rsslab_process_anon_memory_bytes,
// rsslab_process_threads, rsslab_glibc_arenas, rsslab_glibc_arena_resident_bytes,
// rsslab_heap_resident_bytes, rsslab_thread_stacks_resident_bytes, rsslab_allocator_info.
// `labels` (e.g. one worker's service and pid, in an exporter of many
// processes) go on every sample; rsslab_allocator_info adds allocator= and
// library= unless `labels` has them.
void ProcessGauges(const rsslab::v1::ProcStatus& st, const rsslab::v1::MemoryMap& mm,
                   const std::string& allocator, const std::string& library, Exposition* e,
                   const Labels& labels = {});

}  // namespace metrics
}  // namespace rsslab

#endif  // RSSLAB_COMMON_METRICS_PROCESS_GAUGES_H_
