#include "loadgen/results/summary_render.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "common/untrusted_text.h"
#include "common/files.h"
#include "common/phase.h"
#include "loadgen/results/fill_check.h"

namespace rsslab {
namespace {

std::string Mib(int64_t bytes) {
  return bytes < 0 ? "-" : absl::StrFormat("%.1f", bytes / 1048576.0);
}

std::string Ms(double us) { return absl::StrFormat("%.2f", us / 1000.0); }

std::string PhaseRss(const SoakCycle& c, const char* phase) {
  auto it = c.rss.find(phase);
  return it == c.rss.end() ? "-" : Mib(it->second);
}
std::string Delta(int64_t bytes) { return absl::StrFormat("%+.1f", bytes / 1048576.0); }
double CycleQps(const SoakCycle& c) {
  return c.load_seconds > 0 ? c.requests / c.load_seconds : 0;
}

std::string Utc(int64_t nanos) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", absl::FromUnixNanos(nanos),
                          absl::UTCTimeZone());
}

std::string SoakMarkdown(const SoakSummary& k) {
  std::string md = "## Soak: per cycle\n\n";
  absl::StrAppendFormat(
      &md,
      "%d cycles, %d flagged (post-idle RSS growth over %.1f MiB since the "
      "previous cycle, or more threads); %d watch records.\n\n",
      k.cycles.size(), k.flagged, k.threshold_mb, k.watch_records);
  if (k.server_lost) {
    absl::StrAppend(&md, "**SERVER LOST** at ", Utc(k.lost_unix_nanos), ": ",
                    k.lost_error, "\n\n");
  }
  if (k.last_snapshot_unix_nanos != 0) {
    const auto& st = k.last_snapshot.status();
    absl::StrAppendFormat(
        &md, "Last snapshot%s at %s: rss %s MiB, anon %s MiB, %d threads, %d arenas.\n\n",
        k.server_lost ? " before the server was lost" : "",
        Utc(k.last_snapshot_unix_nanos), Mib(st.rss_bytes()), Mib(st.anon_bytes()),
        st.threads(), k.last_snapshot.memory_map().arena_count());
  }
  if (k.first_interval_p99_us >= 0) {
    absl::StrAppendFormat(&md,
                          "p99 per watch interval: first %s ms, last %s ms, worst %s ms.\n\n",
                          Ms(k.first_interval_p99_us), Ms(k.last_interval_p99_us),
                          Ms(k.max_interval_p99_us));
  }
  md += "| cycle | fill MiB | shrink MiB | idle MiB | trim MiB | Δ prev MiB | "
        "Δ first MiB | threads (Δ) | arenas (Δ) | qps | p99 ms | flag |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& c : k.cycles) {
    const bool idle = c.post_idle_rss >= 0;
    absl::StrAppendFormat(
        &md, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s |\n",
        c.cycle + 1, PhaseRss(c, "fill"), PhaseRss(c, "shrink"),
        PhaseRss(c, "idle"), PhaseRss(c, "trim"),
        c.has_prev ? Delta(c.growth_prev) : "-", idle ? Delta(c.growth_first) : "-",
        idle ? absl::StrFormat("%d (%+d)", c.threads, c.thread_change) : "-",
        idle ? absl::StrFormat("%d (%+d)", c.arenas, c.arena_change) : "-",
        CycleQps(c), Ms(c.p99_us),
        c.flagged ? "**FLAGGED**: " + c.flag_reason : "");
  }
  md += "\nRSS at the end of each phase of the cycle; Δ figures compare the "
        "post-idle RSS (after gc.collect()) with the previous and the first "
        "cycle; threads and arenas at the post-idle snapshot.\n\n";
  return md;
}

// The load steps, one row each (a streaming step's ok and failed count
// streams, its messages beside them), then each streaming method's totals.
std::string LoadStepsMarkdown(const RunSummary& s) {
  std::string md =
      "\n## Load steps\n\n| step | mode | ok | failed | qps | p50 ms | p90 ms "
      "| p99 ms | p99.9 ms | max ms | client cpu s | req/cpu-s | late sends "
      "| statuses | messages sent | messages received |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& l : s.loads) {
    std::vector<std::string> codes;
    for (const auto& [k, v] : l.status_counts()) codes.push_back(absl::StrCat(k, "=", v));
    std::sort(codes.begin(), codes.end());
    absl::StrAppendFormat(
        &md,
        "| %s%s | %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %.2f | %.0f | %d | %s | %s | "
        "%s |\n",
        l.step(), l.interrupted() ? " (interrupted)" : "",
        l.mode() == "open" ? absl::StrFormat("open %.0f/s", l.target_rate())
                           : absl::StrFormat("closed %d/%dch", l.concurrency(), l.channels()),
        l.requests_ok(), l.requests_failed(), l.qps(), Ms(l.latency().p50_us()),
        Ms(l.latency().p90_us()), Ms(l.latency().p99_us()),
        Ms(l.latency().p999_us()), Ms(l.latency().max_us()), l.client_cpu_s(),
        l.requests_per_client_cpu_s(), l.behind_schedule(),
        absl::StrJoin(codes, " "), l.streaming() ? absl::StrCat(l.messages_sent()) : "-",
        l.streaming() ? absl::StrCat(l.messages_received()) : "-");
  }
  if (s.stream_messages.empty()) return md;
  md += "\n## Streaming messages by method\n\n| call | streams | messages sent | "
        "messages received |\n|---|---|---|---|\n";
  for (const auto& [call, m] : s.stream_messages) {
    absl::StrAppendFormat(&md, "| %s | %d | %d | %d |\n", Echo(call, 256), m.streams, m.sent,
                          m.received);
  }
  return md;
}

std::string Pss(int64_t bytes) { return bytes < 0 ? "-" : Mib(bytes); }

// Every process the service records name, the master first, then workers
// by pid (ServiceMemory's order).
std::vector<rsslab::v1::ServiceProcess> ServiceProcesses(const RunSummary& s) {
  std::vector<rsslab::v1::ServiceProcess> out;
  std::set<int> seen;
  for (const auto& [phase, m] : s.service_after_phase) {
    for (const auto& p : m.processes()) {
      if (seen.insert(p.pid()).second) out.push_back(p);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return (a.role() == "master") != (b.role() == "master") ? a.role() == "master"
                                                            : a.pid() < b.pid();
  });
  return out;
}

const rsslab::v1::ServiceProcess* ProcessIn(const rsslab::v1::ServiceMemory& m, int pid) {
  for (const auto& p : m.processes()) {
    if (p.pid() == pid) return &p;
  }
  return nullptr;
}

// The service's totals by phase, then a table per process.
std::string ServiceMarkdown(const RunSummary& s) {
  if (s.service_after_phase.empty()) return "";
  const std::vector<rsslab::v1::ServiceProcess> procs = ServiceProcesses(s);
  std::string md =
      "## Service memory: master and workers\n\n"
      "A pre-fork service's memory is its master's and its workers' together: the rss "
      "columns above are the sum of every process's RSS. Summed RSS counts a page "
      "the processes share (what the master had before the fork) once per process; "
      "PSS splits each shared page among its sharers, so summed PSS is the service's "
      "real share of the machine. Read from `/proc/PID/status` and `smaps_rollup` "
      "right after each worker's Control answered.\n\n"
      "| phase | processes | rss MiB | pss MiB | anon MiB |";
  for (const auto& p : procs) absl::StrAppendFormat(&md, " %s %d rss MiB |", p.role(), p.pid());
  md += "\n|---|---|---|---|---|";
  for (size_t i = 0; i < procs.size(); ++i) md += "---|";
  md += "\n";
  for (rsslab::v1::Phase phase : kCyclePhases) {
    auto it = s.service_after_phase.find(PhaseName(phase));
    if (it == s.service_after_phase.end()) continue;
    const auto& m = it->second;
    absl::StrAppendFormat(&md, "| %s | %d | %s | %s | %s |", it->first, m.processes_size(),
                          Mib(m.rss_bytes()), Pss(m.pss_bytes()), Mib(m.anon_bytes()));
    for (const auto& p : procs) {
      const auto* q = ProcessIn(m, p.pid());
      absl::StrAppend(&md, " ", q == nullptr ? "-" : Mib(q->rss_bytes()), " |");
    }
    md += "\n";
  }
  for (const auto& p : procs) {
    absl::StrAppendFormat(&md,
                          "\n### %s pid %d\n\n| phase | rss MiB | pss MiB | anon MiB | hwm MiB "
                          "| threads |\n|---|---|---|---|---|---|\n",
                          p.role(), p.pid());
    for (rsslab::v1::Phase phase : kCyclePhases) {
      auto it = s.service_after_phase.find(PhaseName(phase));
      if (it == s.service_after_phase.end()) continue;
      const auto* q = ProcessIn(it->second, p.pid());
      if (q == nullptr) continue;
      absl::StrAppendFormat(&md, "| %s | %s | %s | %s | %s | %d |\n", it->first,
                            Mib(q->rss_bytes()), Pss(q->pss_bytes()), Mib(q->anon_bytes()),
                            Mib(q->hwm_bytes()), q->threads());
    }
  }
  return md + "\n";
}

}  // namespace

std::string ServiceCsv(const RunSummary& s) {
  if (s.service_after_phase.empty()) return "";
  std::string out = "phase,pid,role,rss_mib,pss_mib,anon_mib,hwm_mib,threads\n";
  for (rsslab::v1::Phase phase : kCyclePhases) {
    auto it = s.service_after_phase.find(PhaseName(phase));
    if (it == s.service_after_phase.end()) continue;
    const auto& m = it->second;
    int64_t hwm = 0;
    int threads = 0;
    for (const auto& p : m.processes()) {
      absl::StrAppendFormat(&out, "%s,%d,%s,%s,%s,%s,%s,%d\n", it->first, p.pid(), p.role(),
                            Mib(p.rss_bytes()), Pss(p.pss_bytes()), Mib(p.anon_bytes()),
                            Mib(p.hwm_bytes()), p.threads());
      hwm += p.hwm_bytes();
      threads += p.threads();
    }
    absl::StrAppendFormat(&out, "%s,0,total,%s,%s,%s,%s,%d\n", it->first, Mib(m.rss_bytes()),
                          Pss(m.pss_bytes()), Mib(m.anon_bytes()), Mib(hwm), threads);
  }
  return out;
}

std::string SoakCycleLine(const SoakCycle& c) {
  std::string out = absl::StrFormat(
      "cycle %d: rss fill/shrink/idle/trim %s/%s/%s/%s MiB", c.cycle + 1,
      PhaseRss(c, "fill"), PhaseRss(c, "shrink"), PhaseRss(c, "idle"),
      PhaseRss(c, "trim"));
  if (c.post_idle_rss >= 0) {
    absl::StrAppendFormat(&out, "; post-idle %s vs prev, %s vs first",
                          c.has_prev ? Delta(c.growth_prev) : "-",
                          Delta(c.growth_first));
    absl::StrAppendFormat(&out, "; threads %d (%+d), arenas %d (%+d)", c.threads,
                          c.thread_change, c.arenas, c.arena_change);
  }
  absl::StrAppendFormat(&out, "; %.0f qps, p99 %.2f ms", CycleQps(c), c.p99_us / 1000);
  if (c.flagged) absl::StrAppend(&out, "  FLAGGED: ", c.flag_reason);
  return out;
}

std::string SoakText(const SoakSummary& k) {
  std::string out;
  for (const auto& c : k.cycles) absl::StrAppend(&out, SoakCycleLine(c), "\n");
  absl::StrAppendFormat(&out, "soak: %d cycles, %d flagged, %d watch records\n",
                        k.cycles.size(), k.flagged, k.watch_records);
  if (k.server_lost) {
    const auto& st = k.last_snapshot.status();
    absl::StrAppendFormat(
        &out,
        "soak: SERVER LOST at %s: %s; last snapshot at %s: rss %.1f MiB, %d threads, %d "
        "arenas\n",
        Utc(k.lost_unix_nanos), k.lost_error,
        k.last_snapshot_unix_nanos == 0
            ? "-"
            : absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(k.last_snapshot_unix_nanos),
                               absl::UTCTimeZone()),
        st.rss_bytes() / 1048576.0, st.threads(), k.last_snapshot.memory_map().arena_count());
  }
  return out;
}

std::string SoakCyclesCsv(const SoakSummary& s) {
  std::string out =
      "cycle,rss_fill_mib,rss_shrink_mib,rss_idle_mib,rss_trim_mib,"
      "growth_prev_mib,growth_first_mib,threads,thread_change,arenas,"
      "arena_change,qps,p99_ms,flagged,flag_reason\n";
  for (const auto& c : s.cycles) {
    const bool idle = c.post_idle_rss >= 0;
    absl::StrAppendFormat(
        &out, "%d,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%.0f,%s,%s,\"%s\"\n", c.cycle + 1,
        PhaseRss(c, "fill"), PhaseRss(c, "shrink"), PhaseRss(c, "idle"),
        PhaseRss(c, "trim"), c.has_prev ? Delta(c.growth_prev) : "-",
        idle ? Delta(c.growth_first) : "-",
        idle ? absl::StrCat(c.threads) : "-",
        c.has_prev ? absl::StrCat(c.thread_change) : "-",
        idle ? absl::StrCat(c.arenas) : "-",
        c.has_prev ? absl::StrCat(c.arena_change) : "-", CycleQps(c),
        Ms(c.p99_us), c.flagged ? "yes" : "no", c.flag_reason);
  }
  return out;
}

std::vector<std::string> SummaryColumns() {
  return {"scenario",       "completed",     "workers",     "allocator",
          "rss_fill_mib",   "rss_shrink_mib", "rss_idle_mib", "rss_trim_mib",
          "hwm_mib",        "threads",       "arenas",      "qps",
          "p50_ms",         "p99_ms",        "requests",    "errors",
          "fill"};
}

std::vector<std::string> SummaryRow(const RunSummary& s) {
  std::vector<std::string> row;
  row.push_back(s.scenario.empty() ? "-" : Echo(s.scenario, 64));
  row.push_back(s.completed ? "yes" : "no");
  row.push_back(s.workers < 0 ? "-" : absl::StrCat(s.workers));
  row.push_back(s.allocator.empty() ? "-" : Echo(s.allocator, 64));
  for (rsslab::v1::Phase phase : kCyclePhases) {
    auto it = s.after_phase.find(PhaseName(phase));
    row.push_back(it == s.after_phase.end() ? "-"
                                            : Mib(it->second.status().rss_bytes()));
  }
  row.push_back(Mib(s.hwm_bytes));
  row.push_back(s.threads < 0 ? "-" : absl::StrCat(s.threads));
  row.push_back(s.arenas < 0 ? "-" : absl::StrCat(s.arenas));
  row.push_back(s.load_seconds > 0
                    ? absl::StrFormat("%.0f", s.requests / s.load_seconds)
                    : "-");
  row.push_back(s.latency.count() ? Ms(s.latency.Percentile(50) / 1e3) : "-");
  row.push_back(s.latency.count() ? Ms(s.latency.Percentile(99) / 1e3) : "-");
  row.push_back(absl::StrCat(s.requests));
  row.push_back(absl::StrCat(s.failed));
  row.push_back(FillCell(s.fill));
  return row;
}

std::string SummaryMarkdown(const RunSummary& s, const std::string& run_dir) {
  std::string md = absl::StrFormat("# rsslab run: %s\n\n", Echo(s.scenario));
  absl::StrAppend(&md, "Run directory: `", Echo(run_dir, 1024), "`  \nTarget: `", Echo(s.target),
                  "`  \nHandler: `", HandlerLabel(s), "`  \n");
  if (s.completed) {
    absl::StrAppend(&md, "Status: **completed** (every step succeeded)\n\n");
  } else {
    absl::StrAppend(&md, "Status: **INCOMPLETE** — ",
                    s.has_footer ? Echo(s.error, 1024)
                                 : "no footer record (the loadgen stopped "
                                   "without finishing)",
                    "\n\n");
  }
  for (const auto& f : s.failed_steps) {
    absl::StrAppend(&md, "- step `", Echo(f.step()), "` (", Echo(f.kind()), ") failed: ",
                    Echo(f.error(), 1024), "\n");
  }
  if (!s.failed_steps.empty()) md += "\n";
  md += FillMarkdown(s.fill);
  if (s.soak.enabled) md += SoakMarkdown(s.soak);
  md += "## Memory after each phase (seed 000 style)\n\n";
  const auto cols = SummaryColumns();
  absl::StrAppend(&md, "| ", absl::StrJoin(cols, " | "), " |\n|");
  for (size_t i = 0; i < cols.size(); ++i) md += "---|";
  absl::StrAppend(&md, "\n| ", absl::StrJoin(SummaryRow(s), " | "), " |\n\n");
  md +=
      "RSS in MiB from the server's last snapshot (after `gc.collect()`) in "
      "each phase; hwm is the largest VmHWM, threads the largest OS thread "
      "count and arenas the largest glibc arena count seen; qps, p50 and p99 "
      "over every load step.\n\n";
  md += ServiceMarkdown(s);
  md += "## Snapshots by phase\n\n| phase | rss MiB | hwm MiB | anon MiB | "
        "threads | arenas | arena rss MiB | cache MiB | cache entries |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (rsslab::v1::Phase phase : kCyclePhases) {
    const std::string p = PhaseName(phase);
    auto it = s.after_phase.find(p);
    if (it == s.after_phase.end()) continue;
    const auto& sn = it->second;
    absl::StrAppendFormat(
        &md, "| %s | %s | %s | %s | %d | %d | %s | %s | %d |\n", p,
        Mib(sn.status().rss_bytes()), Mib(sn.status().hwm_bytes()),
        Mib(sn.status().anon_bytes()), sn.status().threads(),
        sn.memory_map().arena_count(), Mib(sn.memory_map().arena_rss_bytes()),
        Mib(sn.cache().cache_bytes()), sn.cache().cache_entries());
  }
  md += LoadStepsMarkdown(s);
  return md;
}

std::string SummaryCsv(const RunSummary& s, const std::string& run_dir) {
  std::vector<std::string> cols = SummaryColumns();
  cols.insert(cols.begin(), "run_dir");
  std::vector<std::string> row = SummaryRow(s);
  row.insert(row.begin(), run_dir);
  // Streaming messages over every streaming step (0 for a run of unary
  // calls); summary.md has them by step and by method.
  uint64_t sent = 0, received = 0;
  for (const auto& [call, m] : s.stream_messages) {
    sent += m.sent;
    received += m.received;
  }
  cols.insert(cols.end(), {"messages_sent", "messages_received"});
  row.insert(row.end(), {absl::StrCat(sent), absl::StrCat(received)});
  for (auto& v : row) {
    if (v.find_first_of(",\"") != std::string::npos) {
      v = absl::StrCat("\"", absl::StrReplaceAll(v, {{"\"", "\"\""}}), "\"");
    }
  }
  return absl::StrCat(absl::StrJoin(cols, ","), "\n", absl::StrJoin(row, ","),
                      "\n");
}

absl::Status WriteSummary(const std::string& run_dir, const RunSummary& s) {
  if (auto st = WriteFileAtomically(absl::StrCat(run_dir, "/summary.md"),
                                    SummaryMarkdown(s, run_dir));
      !st.ok()) {
    return st;
  }
  if (auto st =
          WriteFileAtomically(absl::StrCat(run_dir, "/summary.csv"), SummaryCsv(s, run_dir));
      !st.ok()) {
    return st;
  }
  if (const std::string svc = ServiceCsv(s); !svc.empty()) {
    if (auto st = WriteFileAtomically(absl::StrCat(run_dir, "/service.csv"), svc); !st.ok()) {
      return st;
    }
  }
  if (!s.soak.enabled) return absl::OkStatus();
  return WriteFileAtomically(absl::StrCat(run_dir, "/soak_cycles.csv"), SoakCyclesCsv(s.soak));
}

std::string HandlerLabel(const RunSummary& s) {
  if (s.handler.empty()) return "-";
  std::string label = Echo(s.handler.substr(s.handler.find_last_of('/') + 1));
  if (!s.handler_params_recorded) return label + " (knobs not recorded)";
  for (const auto& kv : s.handler_params) {
    absl::StrAppend(&label, " ", Echo(kv.first, 64), "=", Echo(kv.second, 64));
  }
  return label;
}

std::string SummaryTable(const std::vector<RunSummary>& runs,
                         const std::vector<std::string>& labels) {
  std::vector<std::string> cols = SummaryColumns();
  cols.insert(cols.begin(), "run");
  std::vector<std::vector<std::string>> rows = {cols};
  for (size_t i = 0; i < runs.size(); ++i) {
    auto r = SummaryRow(runs[i]);
    r.insert(r.begin(), i < labels.size() ? labels[i] : absl::StrCat(i + 1));
    rows.push_back(r);
  }
  std::vector<size_t> w(cols.size(), 0);
  for (auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
  std::string out;
  for (auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      absl::StrAppend(&out, c ? "  " : "", r[c],
                      std::string(w[c] - r[c].size(), ' '));
    }
    out += "\n";
  }
  std::set<std::string> handlers;
  for (const RunSummary& r : runs) handlers.insert(HandlerLabel(r));
  if (handlers.size() > 1) {
    out += "WARNING: these runs used different handlers or handler knobs; compare with care:\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      absl::StrAppend(&out, "  ", i < labels.size() ? labels[i] : absl::StrCat(i + 1), ": ",
                      HandlerLabel(runs[i]), "\n");
    }
  }
  return out;
}

}  // namespace rsslab
