#include "loadgen/results.h"

#include <stdio_ext.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;

constexpr const char* kPhaseOrder[] = {"fill", "shrink", "idle", "trim"};

absl::Status MakeDirs(const std::string& dir) {
  std::string cur;
  for (absl::string_view part : absl::StrSplit(dir, '/')) {
    if (cur.empty() && dir[0] == '/') cur = "/";
    if (part.empty()) continue;
    cur = cur.empty() || cur == "/" ? absl::StrCat(cur, part)
                                    : absl::StrCat(cur, "/", part);
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrFormat("cannot create %s: %s", cur, strerror(errno)));
    }
  }
  return absl::OkStatus();
}

std::string Mib(int64_t bytes) {
  return bytes < 0 ? "-" : absl::StrFormat("%.1f", bytes / 1048576.0);
}

std::string Ms(double us) { return absl::StrFormat("%.2f", us / 1000.0); }

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Create(
    const std::string& dir, bool fsync) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string path = absl::StrCat(dir, "/events.jsonl");
  FILE* f = fopen(path.c_str(), "wx");  // x: never append to another run
  if (f == nullptr) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "cannot create %s: %s (choose another --out)", path, strerror(errno)));
  }
  return std::unique_ptr<EventLog>(new EventLog(path, f, fsync));
}

EventLog::~EventLog() {
  absl::MutexLock l(&mu_);
  if (file_ != nullptr) fclose(file_);
}

absl::Status EventLog::Append(Event event) {
  absl::MutexLock l(&mu_);
  event.set_seq(++seq_);  // 1-based: 0 would vanish from the JSON
  if (event.unix_nanos() == 0) event.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  const std::string line = EventToJson(event) + "\n";
  if (fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      fflush(file_) != 0) {
    const int err = errno;
    // Drop the unwritten rest and cut off the partial record.
    __fpurge(file_);
    clearerr(file_);
    if (ftruncate(fileno(file_), good_size_) == 0) fseeko(file_, good_size_, SEEK_SET);
    --seq_;
    return absl::InternalError(
        absl::StrFormat("cannot write %s: %s", path_, strerror(err)));
  }
  good_size_ += static_cast<off_t>(line.size());
  if (fsync_) fsync(fileno(file_));
  return absl::OkStatus();
}

uint64_t EventLog::count() const {
  absl::MutexLock l(&mu_);
  return seq_;
}

std::string EventToJson(const Event& event) {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.add_whitespace = false;
  std::string out;
  // Printing a well-formed message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(event, &out, o);
  return out;
}

absl::StatusOr<std::vector<Event>> ReadEvents(const std::string& dir,
                                              int* skipped) {
  const std::string path = absl::StrCat(dir, "/events.jsonl");
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::vector<Event> events;
  std::string line;
  int bad = 0;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;  // records from a newer loadgen
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    Event e;
    if (google::protobuf::util::JsonStringToMessage(line, &e, o).ok()) {
      events.push_back(std::move(e));
    } else {
      ++bad;
    }
  }
  if (skipped != nullptr) *skipped = bad;
  return events;
}

void SummaryBuilder::AddSnapshot(const std::string& phase,
                                 const rsslab::v1::Snapshot& snap) {
  if (!phase.empty()) s_.after_phase[phase] = snap;
  s_.hwm_bytes = std::max<int64_t>(s_.hwm_bytes, snap.status().hwm_bytes());
  s_.threads = std::max(s_.threads, snap.status().threads());
  s_.arenas = std::max(s_.arenas, snap.memory_map().arena_count());
  if (snap.config().threads() > 0) s_.workers = snap.config().threads();
  else if (snap.workers().configured() > 0) s_.workers = snap.workers().configured();
  if (!snap.allocator().empty()) s_.allocator = snap.allocator();
}

void SummaryBuilder::Add(const Event& e) {
  switch (e.record_case()) {
    case Event::kHeader:
      s_.scenario = e.header().scenario_name();
      s_.target = e.header().target();
      break;
    case Event::kSnapshot:
      AddSnapshot(e.loadgen_phase(), e.snapshot());
      break;
    case Event::kPhase:
      // trim's "before" is not an "after trim" figure, but counts for HWM.
      if (e.phase().has_before()) AddSnapshot("", e.phase().before());
      AddSnapshot(e.loadgen_phase(), e.phase().snapshot());
      break;
    case Event::kTrim:
      AddSnapshot(e.loadgen_phase(), e.trim().after());
      break;
    case Event::kLoad: {
      s_.loads.push_back(e.load());
      auto h = Histogram::FromProto(e.load().histogram());
      if (h.ok()) s_.latency.Merge(*h);
      s_.requests += e.load().requests_ok() + e.load().requests_failed();
      s_.failed += e.load().requests_failed();
      s_.load_seconds += e.load().elapsed_s();
      break;
    }
    case Event::kStep:
      if (!e.step().ok()) s_.failed_steps.push_back(e.step());
      break;
    case Event::kFooter:
      s_.has_footer = true;
      s_.completed = e.footer().completed();
      s_.error = e.footer().error();
      break;
    default:
      break;
  }
}

std::vector<std::string> SummaryColumns() {
  return {"scenario",       "completed",     "workers",     "allocator",
          "rss_fill_mib",   "rss_shrink_mib", "rss_idle_mib", "rss_trim_mib",
          "hwm_mib",        "threads",       "arenas",      "qps",
          "p50_ms",         "p99_ms",        "requests",    "errors"};
}

std::vector<std::string> SummaryRow(const RunSummary& s) {
  std::vector<std::string> row;
  row.push_back(s.scenario.empty() ? "-" : s.scenario);
  row.push_back(s.completed ? "yes" : "no");
  row.push_back(s.workers < 0 ? "-" : absl::StrCat(s.workers));
  row.push_back(s.allocator.empty() ? "-" : s.allocator);
  for (const char* p : kPhaseOrder) {
    auto it = s.after_phase.find(p);
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
  return row;
}

std::string SummaryMarkdown(const RunSummary& s, const std::string& run_dir) {
  std::string md = absl::StrFormat("# rsslab run: %s\n\n", s.scenario);
  absl::StrAppend(&md, "Run directory: `", run_dir, "`  \nTarget: `", s.target,
                  "`  \n");
  if (s.completed) {
    absl::StrAppend(&md, "Status: **completed** (every step succeeded)\n\n");
  } else {
    absl::StrAppend(&md, "Status: **INCOMPLETE** — ",
                    s.has_footer ? s.error
                                 : "no footer record (the loadgen stopped "
                                   "without finishing)",
                    "\n\n");
  }
  for (const auto& f : s.failed_steps) {
    absl::StrAppend(&md, "- step `", f.step(), "` (", f.kind(), ") failed: ",
                    f.error(), "\n");
  }
  if (!s.failed_steps.empty()) md += "\n";
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
  md += "## Snapshots by phase\n\n| phase | rss MiB | hwm MiB | anon MiB | "
        "threads | arenas | arena rss MiB | cache MiB | cache entries |\n"
        "|---|---|---|---|---|---|---|---|---|\n";
  for (const char* p : kPhaseOrder) {
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
  md += "\n## Load steps\n\n| step | mode | ok | failed | qps | p50 ms | p90 ms "
        "| p99 ms | p99.9 ms | max ms | client cpu s | req/cpu-s | late sends "
        "| statuses |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& l : s.loads) {
    std::vector<std::string> codes;
    for (const auto& [k, v] : l.status_counts()) codes.push_back(absl::StrCat(k, "=", v));
    std::sort(codes.begin(), codes.end());
    absl::StrAppendFormat(
        &md, "| %s%s | %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %.2f | %.0f | %d | %s |\n",
        l.step(), l.interrupted() ? " (interrupted)" : "",
        l.mode() == "open" ? absl::StrFormat("open %.0f/s", l.target_rate())
                           : absl::StrFormat("closed %d/%dch", l.concurrency(), l.channels()),
        l.requests_ok(), l.requests_failed(), l.qps(), Ms(l.latency().p50_us()),
        Ms(l.latency().p90_us()), Ms(l.latency().p99_us()),
        Ms(l.latency().p999_us()), Ms(l.latency().max_us()), l.client_cpu_s(),
        l.requests_per_client_cpu_s(), l.behind_schedule(),
        absl::StrJoin(codes, " "));
  }
  return md;
}

std::string SummaryCsv(const RunSummary& s, const std::string& run_dir) {
  std::vector<std::string> cols = SummaryColumns();
  cols.insert(cols.begin(), "run_dir");
  std::vector<std::string> row = SummaryRow(s);
  row.insert(row.begin(), run_dir);
  for (auto& v : row) {
    if (v.find_first_of(",\"") != std::string::npos) {
      v = absl::StrCat("\"", absl::StrReplaceAll(v, {{"\"", "\"\""}}), "\"");
    }
  }
  return absl::StrCat(absl::StrJoin(cols, ","), "\n", absl::StrJoin(row, ","),
                      "\n");
}

absl::Status WriteSummary(const std::string& run_dir, const RunSummary& s) {
  if (auto st = WriteFile(absl::StrCat(run_dir, "/summary.md"),
                          SummaryMarkdown(s, run_dir));
      !st.ok()) {
    return st;
  }
  return WriteFile(absl::StrCat(run_dir, "/summary.csv"), SummaryCsv(s, run_dir));
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
  return out;
}

}  // namespace rsslab
