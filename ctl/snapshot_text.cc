#include "ctl/snapshot_text.h"

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/untrusted_text.h"
#include "common/utf8_message.h"
#include "google/protobuf/util/json_util.h"

namespace rsslab {

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

namespace {

// Every string below comes from the server (or a process it read): escaped
// and cut where printed, so a thread name or a handler's text cannot forge
// a line or drive the terminal.
std::string E(const std::string& s) { return Echo(s, 128); }

// phase, memory (procfs status) and smaps (classified mappings).
void AppendProcess(const rsslab::v1::Snapshot& s, std::string* out) {
  const auto& st = s.status();
  const auto& mm = s.memory_map();
  absl::StrAppendFormat(out, "phase %s  up %.1fs  pid %d  served %d (in phase %d)  errors %d  refused %d\n",
                        E(s.phase()), s.uptime_s(), s.pid(), s.requests_served(),
                        s.requests_in_phase(), s.handler_errors(), s.requests_refused());
  absl::StrAppendFormat(out, "memory   rss %s  hwm %s  anon %s  file %s  swap %s  threads %d\n",
                        Mib(st.rss_bytes()), Mib(st.hwm_bytes()), Mib(st.anon_bytes()),
                        Mib(st.file_bytes()), Mib(st.swap_bytes()), st.threads());
  absl::StrAppendFormat(
      out, "smaps    heap %s  arenas %d (%s)  stacks %d (%s)  other anon %s  file %s  anon maps %d\n",
      Mib(mm.heap_rss_bytes()), mm.arena_count(), Mib(mm.arena_rss_bytes()), mm.stack_count(),
      Mib(mm.stack_rss_bytes()), Mib(mm.other_anon_rss_bytes()), Mib(mm.file_rss_bytes()),
      mm.anon_mappings());
}

// alloc: which allocator, its library and environment.
void AppendAllocator(const rsslab::v1::Snapshot& s, std::string* out) {
  std::string env;
  for (const auto& kv : s.allocator_env()) absl::StrAppend(&env, " ", E(kv.first), "=", E(kv.second));
  absl::StrAppendFormat(out, "alloc    %s%s%s\n", E(s.allocator()),
                        s.allocator_library().empty() ? "" : " (" + E(s.allocator_library()) + ")",
                        env.empty() ? "" : "  env:" + env);
}

// The allocator's own statistics: a line for each allocator that gave some
// (glibc's only when glibc is the allocator).
void AppendAllocatorStats(const rsslab::v1::Snapshot& s, std::string* out) {
  const auto& as = s.allocator_stats();
  if (as.has_glibc() && s.allocator() == "glibc") {
    const auto& g = as.glibc();
    absl::StrAppendFormat(out,
                          "glibc    in use %s  free %s  mmapped %s (%d)  malloc_info arenas %d  "
                          "system %s  releasable top %s\n",
                          Mib(g.uordblks()), Mib(g.fordblks()), Mib(g.hblkhd()), g.hblks(),
                          g.malloc_info_arenas(), Mib(g.total_system_bytes()), Mib(g.keepcost()));
  }
  if (as.has_jemalloc()) {
    const auto& j = as.jemalloc();
    absl::StrAppendFormat(out,
                          "jemalloc %s  allocated %s  active %s  resident %s  mapped %s  "
                          "retained %s  arenas %d  bg_thread %s\n",
                          E(j.version()), Mib(j.allocated()), Mib(j.active()), Mib(j.resident()),
                          Mib(j.mapped()), Mib(j.retained()), j.narenas(), j.background_thread() ? "on" : "off");
  }
  if (as.has_mimalloc()) {
    const auto& m = as.mimalloc();
    if (m.refused_size() == 0) {
      absl::StrAppendFormat(out, "mimalloc %s (%s)  rss %s  commit %s  peak commit %s\n",
                            E(m.version_text()), E(m.layout()), Mib(m.current_rss()),
                            Mib(m.current_commit()), Mib(m.peak_commit()));
    } else {
      // Figures the version's layout cannot give are not printed as zeros.
      absl::StrAppendFormat(out, "mimalloc %s (%s)  peak rss %s  refused: %s\n",
                            E(m.version_text()), m.layout().empty() ? "unknown" : E(m.layout()),
                            Mib(m.peak_rss()), E(absl::StrJoin(m.refused(), "; ")));
    }
  }
  if (as.has_tcmalloc()) {
    const auto& t = as.tcmalloc();
    absl::StrAppendFormat(out,
                          "tcmalloc allocated %s  heap %s  pageheap free %s  unmapped %s  "
                          "thread caches %s\n",
                          Mib(t.current_allocated_bytes()), Mib(t.heap_size()),
                          Mib(t.pageheap_free_bytes()), Mib(t.pageheap_unmapped_bytes()),
                          Mib(t.current_total_thread_cache_bytes()));
  }
}

// The server's own parts: cache, python, workers, and a benchmark dispatch.
void AppendServer(const rsslab::v1::Snapshot& s, std::string* out) {
  const auto& c = s.cache();
  absl::StrAppendFormat(out,
                        "cache    %s of %s  entries %d  puts %d  hits %d  misses %d  evictions %d\n",
                        Mib(c.cache_bytes()), Mib(c.cache_limit_bytes()), c.cache_entries(),
                        c.puts(), c.hits(), c.misses(), c.evictions());
  const auto& p = s.python();
  absl::StrAppendFormat(out, "python   %s  blocks %d  gil %s%s\n",
                        E(p.version().substr(0, p.version().find(' '))), p.allocated_blocks(),
                        p.gil_enabled() ? "on" : "off",
                        s.gc_duration_us() > 0
                            ? absl::StrFormat("  gc collected %d in %dus", p.gc_collected(),
                                              s.gc_duration_us())
                            : "");
  const auto& w = s.workers();
  absl::StrAppendFormat(out, "workers  %d %s  alive %d  busy %d  stuck %d  started %d  queue %d%s\n",
                        w.configured(), E(w.thread_mode()), w.alive(), w.busy(), w.stuck(),
                        w.threads_started(), w.queue_depth(),
                        w.thread_mode() == "churn"
                            ? absl::StrFormat("  lingering %d", w.lingering())
                            : "");
  // A benchmark dispatch mode never runs the handler: say so loudly.
  const std::string& d = s.config().dispatch();
  if (!d.empty() && d != "python") {
    absl::StrAppend(out, "dispatch ", E(d), " (benchmark mode: the handler is not called)\n");
  }
}

// The thread census, the last trim, and what the snapshot cost.
void AppendThreadsAndTrim(const rsslab::v1::Snapshot& s, std::string* out) {
  std::string names;
  for (const auto& t : s.thread_names()) absl::StrAppend(&names, " ", E(t.comm()), "x", t.count());
  absl::StrAppend(out, "threads ", names, "\n");
  if (s.has_last_trim()) absl::StrAppend(out, "last trim ", TrimText(s.last_trim()));
  absl::StrAppendFormat(out, "snapshot took %dus\n", s.snapshot_duration_us());
}

}  // namespace

std::string SnapshotText(const rsslab::v1::Snapshot& s) {
  std::string out;
  AppendProcess(s, &out);
  AppendAllocator(s, &out);
  AppendAllocatorStats(s, &out);
  AppendServer(s, &out);
  AppendThreadsAndTrim(s, &out);
  return out;
}

std::string TrimText(const rsslab::v1::TrimResult& t) {
  std::string out = absl::StrFormat("%s %s: %s -> %s (freed %s) in %dus", E(t.allocator()), E(t.call()),
                                    Mib(t.rss_before_bytes()), Mib(t.rss_between_bytes()),
                                    Mib(t.global_freed_bytes()), t.trim_duration_us());
  if (t.release_delay_overridden()) {
    absl::StrAppendFormat(&out, " [%s %d -> %d during the trim]", E(t.release_delay_option()),
                          t.release_delay_before(), t.release_delay_during());
  }
  if (t.per_thread()) {
    int ran = 0;
    for (const auto& w : t.workers()) ran += w.ran();
    std::string call = E(t.thread_call());
    if (!t.follow_up_call().empty()) {
      absl::StrAppend(&call, ", after ", t.follow_up_delay_us() / 1000, "ms ",
                      E(t.follow_up_call()));
    }
    if (!t.after_threads_call().empty() && t.after_threads_call() != "none") {
      absl::StrAppend(&call, " then ", E(t.after_threads_call()));
    }
    absl::StrAppendFormat(&out, "; per-thread %s on %d/%d workers: -> %s (freed %s) in %dus, max pause %dus",
                          call, ran, t.workers_size(), Mib(t.rss_after_bytes()),
                          Mib(t.per_thread_freed_bytes()), t.per_thread_duration_us(),
                          t.max_worker_pause_us());
  }
  if (t.has_free_block_purge()) {
    const rsslab::v1::FreeBlockPurgeResult& p = t.free_block_purge();
    if (p.ran()) {
      absl::StrAppendFormat(&out, "; free-block purge: %d ranges, %s over %d pages, longest %dus",
                            p.ranges(), Mib(p.bytes()), p.pages(), p.longest_us());
    } else {
      absl::StrAppendFormat(&out, "; free-block purge did not run (%s)", E(p.note()));
    }
  }
  return out + "\n";
}

std::string SnapshotLine(const rsslab::v1::Snapshot& s) {
  return absl::StrFormat(
      "%s  %-6s rss %9s  anon %9s  threads %3d  arenas %3d (%s)  cache %s  served %d\n",
      absl::FormatTime("%H:%M:%S", absl::FromUnixNanos(s.unix_nanos()), absl::LocalTimeZone()),
      E(s.phase()), Mib(s.status().rss_bytes()), Mib(s.status().anon_bytes()), s.status().threads(),
      s.memory_map().arena_count(), Mib(s.memory_map().arena_rss_bytes()),
      Mib(s.cache().cache_bytes()), s.requests_served());
}

void PrintJsonLine(const google::protobuf::Message& m) {
  // Valid UTF-8 only: a peer's stray byte escaped, not a protobuf log line.
  std::unique_ptr<google::protobuf::Message> copy(m.New());
  copy->CopyFrom(m);
  ReplaceInvalidUtf8(copy.get());
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(*copy, &out, o);
  printf("%s\n", JsonInvisibleEscaped(out).c_str());
  fflush(stdout);
}

}  // namespace rsslab
