// InspectText and InspectSampleLine (declared in inspect.h).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "control/inspect.h"
#include "control/snapshot_text.h"

namespace rsslab {
namespace {

// Batches printed in full; the rest are summed up in one line.
constexpr int kBatchesShown = 40;

std::string NameList(const google::protobuf::RepeatedPtrField<rsslab::v1::ThreadName>& names,
                     int max) {
  std::vector<std::string> out;
  int shown = 0, rest = 0;
  for (const auto& n : names) {
    if (shown++ < max) {
      out.push_back(absl::StrCat(n.comm(), " x", n.count()));
    } else {
      rest += n.count();
    }
  }
  if (rest > 0) out.push_back(absl::StrCat("(", rest, " more)"));
  return absl::StrJoin(out, ", ");
}

}  // namespace

std::string InspectText(const rsslab::v1::InspectReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "pid %d (%s)  uid %d  up %.1fs  exe %s\n", r.pid(), r.comm(), r.uid(),
                        r.age_s(), r.exe().empty() ? "?" : r.exe());
  if (!r.cmdline().empty()) absl::StrAppend(&out, "cmdline  ", r.cmdline(), "\n");
  if (r.partial()) {
    absl::StrAppend(&out, "PARTIAL: ", absl::StrJoin(r.partial_reasons(), "; "), "\n");
  }
  // The diagnosis first: it is what the user came for.
  if (r.findings_size() == 0) {
    absl::StrAppend(&out, "findings: none\n");
  } else {
    absl::StrAppend(&out, "findings:\n");
    for (const auto& f : r.findings()) {
      absl::StrAppendFormat(&out, "  [%s] %s: %s\n", f.severity(), f.rule(), f.summary());
      for (const auto& e : f.evidence()) absl::StrAppend(&out, "      - ", e, "\n");
      absl::StrAppend(&out, "      fix: ", f.fix(), "\n");
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
    waits.push_back(absl::StrCat(w.state(), " ", w.wchan(), " x", w.count()));
  }
  absl::StrAppend(&out, "  by wait   ", absl::StrJoin(waits, ", "), "\n");
  absl::StrAppendFormat(&out, "  batches   %d (threads started within %.0f ms of each other)\n",
                        r.batches_size(), r.batch_window_s() * 1000);
  int shown = 0;
  for (const auto& b : r.batches()) {
    if (shown++ >= kBatchesShown) break;
    absl::StrAppendFormat(&out, "    %4d  %5d thr  +%10.3f s  span %.3f s  idle %d  %s%s\n",
                          b.index(), b.count(), b.start_s(), b.span_s(), b.idle(),
                          NameList(b.names(), 4), b.pool().empty() ? "" : "  <- " + b.pool());
  }
  if (r.batches_size() > kBatchesShown || r.threads_in_dropped_batches() > 0) {
    int rest = r.threads_in_dropped_batches();
    for (int i = kBatchesShown; i < r.batches_size(); ++i) rest += r.batches(i).count();
    absl::StrAppendFormat(&out, "    ... %d more threads in later batches (--json lists them)\n", rest);
  }
  for (const auto& p : r.pools()) {
    absl::StrAppendFormat(&out, "  pool      %s: %d thread%s (%s), %d batch%s of that size\n", p.name(),
                          p.size(), p.size() == 1 ? "" : "s", p.why(), p.batches(),
                          p.batches() == 1 ? "" : "es");
  }
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
  absl::StrAppendFormat(&out, "alloc    %s%s\n", r.allocator(),
                        r.allocator_library().empty() ? "" : " (" + r.allocator_library() + ")");
  std::vector<std::string> env;
  for (const auto& [k, v] : r.start_env()) env.push_back(absl::StrCat(k, "=", v));
  absl::StrAppend(&out, "env      ", env.empty() ? "(none of the allocator or pool variables)" : absl::StrJoin(env, " "),
                  "\n");
  absl::StrAppend(&out, "python   ",
                  r.python_version().empty() ? "no" : r.python_version() + " (" + r.python_source() + ")",
                  "\n");
  if (r.libraries_size() > 0) absl::StrAppend(&out, "libs     ", absl::StrJoin(r.libraries(), " "), "\n");
  if (r.rsslab_loaded()) {
    absl::StrAppend(&out, "rsslab   loaded (", r.rsslab_module(), ")  control ",
                    r.rsslab_control().empty() ? "-" : r.rsslab_control(), " (",
                    r.rsslab_control_note(), ")\n");
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
