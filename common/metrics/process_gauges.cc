#include "common/metrics/process_gauges.h"

#include <algorithm>
#include <utility>

namespace rsslab {
namespace metrics {

void ProcessGauges(const rsslab::v1::ProcStatus& st, const rsslab::v1::MemoryMap& mm,
                   const std::string& allocator, const std::string& library, Exposition* e,
                   const Labels& labels) {
  e->Gauge("rsslab_process_resident_memory_bytes", "VmRSS of the process.", st.rss_bytes(), labels);
  e->Gauge("rsslab_process_resident_memory_max_bytes", "VmHWM: the peak RSS since start.",
           st.hwm_bytes(), labels);
  e->Gauge("rsslab_process_anon_memory_bytes", "RssAnon: anonymous resident memory.",
           st.anon_bytes(), labels);
  e->Gauge("rsslab_process_threads", "OS threads of the process (Threads in /proc/PID/status).",
           static_cast<int64_t>(st.threads()), labels);
  e->Gauge("rsslab_glibc_arenas", "glibc thread-arena heaps found in /proc/PID/smaps.",
           static_cast<int64_t>(mm.arena_count()), labels);
  e->Gauge("rsslab_glibc_arena_resident_bytes", "Resident bytes of the glibc thread arenas.",
           mm.arena_rss_bytes(), labels);
  e->Gauge("rsslab_heap_resident_bytes", "Resident bytes of the brk heap (glibc main arena).",
           mm.heap_rss_bytes(), labels);
  e->Gauge("rsslab_thread_stacks_resident_bytes", "Resident bytes of thread stacks.",
           mm.stack_rss_bytes(), labels);
  Labels info = labels;
  for (const auto& [k, v] : {std::pair<const char*, const std::string&>{"allocator", allocator},
                             {"library", library}}) {
    if (std::none_of(labels.begin(), labels.end(), [&](const auto& l) { return l.first == k; })) {
      info.emplace_back(k, v);
    }
  }
  e->Gauge("rsslab_allocator_info", "The allocator actually loaded (from /proc/PID/maps).",
           int64_t{1}, info);
}

}  // namespace metrics
}  // namespace rsslab
