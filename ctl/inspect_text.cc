// InspectText and InspectSampleLine (declared in inspect.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/untrusted_text.h"
#include "ctl/inspect.h"
#include "ctl/snapshot_text.h"

namespace rsslab {
namespace {

// Batches printed in full; the rest are summed up in one line.
constexpr int kBatchesShown = 40;

// Everything printed that the target controls (thread names, environment,
// command line, paths), and every string built from them (findings'
// evidence): escaped, so a process cannot forge a line of its own report
// ("findings: x1") or drive the terminal (ESC).
std::string E(absl::string_view s) { return Echo(s, 4096); }

std::string NameList(const google::protobuf::RepeatedPtrField<rsslab::v1::ThreadName>& names,
                     int max) {
  std::vector<std::string> out;
  int shown = 0, rest = 0;
  for (const auto& n : names) {
    if (shown++ < max) {
      out.push_back(absl::StrCat(E(n.comm()), " x", n.count()));
    } else {
      rest += n.count();
    }
  }
  if (rest > 0) out.push_back(absl::StrCat("(", rest, " more)"));
  return absl::StrJoin(out, ", ");
}

// Children shown in the text (the JSON has every one kept).
constexpr int kChildrenShown = 16;

// The process model and its children: a pre-fork master names its workers.
void AppendChildren(const rsslab::v1::InspectReport& r, std::string* out) {
  if (r.children_total() == 0 && r.process_model().empty()) return;
  absl::StrAppendFormat(out, "procs    %s%d child process%s\n",
                        r.process_model().empty() ? "" : E(r.process_model()) + ", ",
                        r.children_total(), r.children_total() == 1 ? "" : "es");
  int shown = 0;
  for (const auto& c : r.children()) {
    if (shown++ >= kChildrenShown) break;
    absl::StrAppendFormat(out, "  child    pid %d (%s)%s  %d thr  rss %s  %s\n", c.pid(), E(c.comm()),
                          c.process_model().empty() ? "" : " " + E(c.process_model()), c.threads(),
                          Mib(c.rss_bytes()), E(c.cmdline()));
  }
  if (r.children_total() > kChildrenShown) {
    absl::StrAppendFormat(out, "  ... %d more children (--json lists up to %d)\n",
                          r.children_total() - kChildrenShown, r.children_size());
  }
}

// The heap walk: what malloc_trim(0) would give back, per kind of heap.
void AppendHeapWalk(const rsslab::v1::InspectReport& r, std::string* out) {
  if (!r.has_heap_walk()) return;
  const auto& mm = r.memory_map();
  const auto& w = r.heap_walk();
  if (w.walked()) {
    absl::StrAppendFormat(out, "  brk heap walked: %d chunks, %d free (%s), %s resident in free pages\n",
                          w.chunks(), w.free_chunks(), Mib(w.free_bytes()), Mib(w.trimmable_bytes()));
  } else {
    absl::StrAppend(out, "  brk heap not walked: ", E(w.note()), "\n");
  }
  if (w.arena_heaps_walked() > 0 || mm.arena_count() > 0) {
    absl::StrAppendFormat(
        out, "  arena heaps walked: %d of %d, %d chunks, free %s, %s resident in free pages\n",
        w.arena_heaps_walked(), mm.arena_count(), w.arena_chunks(), Mib(w.arena_free_bytes()),
        Mib(w.arena_trimmable_bytes()));
  }
  absl::StrAppend(out, "  (resident in free pages: what malloc_trim(0) gives back)\n");
}

}  // namespace

std::string InspectText(const rsslab::v1::InspectReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "pid %d (%s)  uid %d  up %.1fs  exe %s\n", r.pid(), E(r.comm()),
                        r.uid(), r.age_s(), r.exe().empty() ? "?" : E(r.exe()));
  if (!r.cmdline().empty()) absl::StrAppend(&out, "cmdline  ", E(r.cmdline()), "\n");
  if (r.partial()) {
    absl::StrAppend(&out, "PARTIAL: ", E(absl::StrJoin(r.partial_reasons(), "; ")), "\n");
  }
  // The diagnosis first: it is what the user came for.
  if (r.findings_size() == 0) {
    absl::StrAppend(&out, "findings: none\n");
  } else {
    absl::StrAppend(&out, "findings:\n");
    for (const auto& f : r.findings()) {
      absl::StrAppendFormat(&out, "  [%s] %s: %s\n", f.severity(), f.rule(), E(f.summary()));
      for (const auto& e : f.evidence()) absl::StrAppend(&out, "      - ", E(e), "\n");
      absl::StrAppend(&out, "      fix: ", E(f.fix()), "\n");
    }
  }
  absl::StrAppendFormat(&out, "threads  %d  cpus allowed %d, online %d%s\n", r.threads(),
                        r.cpus_allowed(), r.cpus_online(),
                        r.threads_vanished() > 0
                            ? absl::StrFormat("  (%d exited while read)", r.threads_vanished())
                            : "");
  absl::StrAppend(&out, "  by name   ", NameList(r.by_comm(), 12), "\n");
  std::vector<std::string> waits;
  for (const auto& w : r.by_wait()) {
    waits.push_back(absl::StrCat(E(w.state()), " ", E(w.wchan()), " x", w.count()));
  }
  absl::StrAppend(&out, "  by wait   ", absl::StrJoin(waits, ", "), "\n");
  absl::StrAppendFormat(&out, "  batches   %d (threads started within %.0f ms of each other)\n",
                        r.batches_size(), r.batch_window_s() * 1000);
  int shown = 0;
  for (const auto& b : r.batches()) {
    if (shown++ >= kBatchesShown) break;
    absl::StrAppendFormat(&out, "    %4d  %5d thr  +%10.3f s  span %.3f s  idle %d  %s%s\n",
                          b.index(), b.count(), b.start_s(), b.span_s(), b.idle(),
                          NameList(b.names(), 4), b.pool().empty() ? "" : "  <- " + E(b.pool()));
  }
  if (r.batches_size() > kBatchesShown || r.threads_in_dropped_batches() > 0) {
    int rest = r.threads_in_dropped_batches();
    for (int i = kBatchesShown; i < r.batches_size(); ++i) rest += r.batches(i).count();
    absl::StrAppendFormat(&out, "    ... %d more threads in later batches (--json lists them)\n", rest);
  }
  for (const auto& p : r.pools()) {
    if (p.matched_by() == "thread names") {
      absl::StrAppendFormat(&out, "  pool      %s: %d thread%s by name (%s)\n", E(p.name()),
                            p.threads(), p.threads() == 1 ? "" : "s", E(p.why()));
      continue;
    }
    absl::StrAppendFormat(&out, "  pool      %s: %d thread%s (%s), %d batch%s of that size\n",
                          E(p.name()), p.size(), p.size() == 1 ? "" : "s", E(p.why()), p.batches(),
                          p.batches() == 1 ? "" : "es");
  }
  AppendChildren(r, &out);
  const auto& st = r.status();
  const auto& mm = r.memory_map();
  absl::StrAppendFormat(&out, "memory   rss %s  hwm %s  anon %s  file %s  swap %s\n",
                        Mib(st.rss_bytes()), Mib(st.hwm_bytes()), Mib(st.anon_bytes()),
                        Mib(st.file_bytes()), Mib(st.swap_bytes()));
  absl::StrAppendFormat(
      &out, "smaps    heap %s  arenas %d (%s)  stacks %d (%s)  other anon %s  file %s  anon maps %d\n",
      Mib(mm.heap_rss_bytes()), mm.arena_count(), Mib(mm.arena_rss_bytes()), mm.stack_count(),
      Mib(mm.stack_rss_bytes()), Mib(mm.other_anon_rss_bytes()), Mib(mm.file_rss_bytes()),
      mm.anon_mappings());
  AppendHeapWalk(r, &out);
  absl::StrAppendFormat(&out, "alloc    %s%s\n", E(r.allocator()),
                        r.allocator_library().empty() ? "" : " (" + E(r.allocator_library()) + ")");
  std::vector<std::string> env;
  for (const auto& [k, v] : r.start_env()) env.push_back(absl::StrCat(E(k), "=", E(v)));
  absl::StrAppend(&out, "env      ", env.empty() ? "(none of the allocator or pool variables)" : absl::StrJoin(env, " "),
                  "\n");
  absl::StrAppend(&out, "python   ",
                  r.python_version().empty() ? "no"
                                             : E(r.python_version()) + " (" + E(r.python_source()) + ")",
                  "\n");
  if (r.libraries_size() > 0) {
    absl::StrAppend(&out, "libs     ", E(absl::StrJoin(r.libraries(), " ")), "\n");
  }
  if (r.rsslab_loaded()) {
    absl::StrAppend(&out, "rsslab   loaded (", E(r.rsslab_module()), ")  control ",
                    r.rsslab_control().empty() ? "-" : E(r.rsslab_control()), " (",
                    E(r.rsslab_control_note()), ")\n");
  } else {
    absl::StrAppend(&out, "rsslab   not loaded\n");
  }
  absl::StrAppendFormat(&out, "inspect took %dus\n", r.inspect_duration_us());
  return out;
}

std::string InspectSampleLine(const rsslab::v1::InspectSample& s) {
  return absl::StrFormat(
      "%s  +%7.1fs  rss %9s  threads %4d  arenas %3d (%s)  per hour: rss %+.1f MiB  threads %+.1f  "
      "arenas %+.1f%s%s\n",
      absl::FormatTime("%H:%M:%S", absl::FromUnixNanos(s.unix_nanos()), absl::LocalTimeZone()),
      s.elapsed_s(), Mib(s.rss_bytes()), s.threads(), s.arenas(), Mib(s.arena_rss_bytes()),
      s.rss_bytes_per_hour() / 1048576.0, s.threads_per_hour(), s.arenas_per_hour(),
      s.flagged() ? "  FLAG " + s.flag_reason() : "", s.partial() ? "  (partial)" : "");
}

}  // namespace rsslab
