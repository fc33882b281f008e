#include "loadgen/results.h"

#include <dirent.h>
#include <fcntl.h>
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

absl::StatusOr<std::unique_ptr<EventLog>> EventLog::Reopen(
    const std::string& dir, bool fsync, uint64_t* torn_bytes) {
  const std::string path = absl::StrCat(dir, "/events.jsonl");
  int fd = open(path.c_str(), O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(
        absl::StrFormat("cannot open %s: %s", path, strerror(errno)));
  }
  std::string text;
  char buf[1 << 16];
  ssize_t n;
  while ((n = pread(fd, buf, sizeof(buf), static_cast<off_t>(text.size()))) > 0) {
    text.append(buf, n);
  }
  if (n < 0) {
    const int e = errno;
    close(fd);
    return absl::InternalError(absl::StrFormat("cannot read %s: %s", path, strerror(e)));
  }
  const size_t keep = text.empty() || text.back() == '\n' ? text.size()
                      : text.rfind('\n') == std::string::npos ? 0
                                                               : text.rfind('\n') + 1;
  *torn_bytes = text.size() - keep;
  if (keep < text.size()) {
    if (ftruncate(fd, static_cast<off_t>(keep)) != 0) {
      const int e = errno;
      close(fd);
      return absl::InternalError(
          absl::StrFormat("cannot cut the torn last line of %s: %s", path, strerror(e)));
    }
    text.resize(keep);
  }
  uint64_t last_seq = 0;
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = true;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    Event e;
    if (google::protobuf::util::JsonStringToMessage(std::string(line), &e, o).ok()) {
      last_seq = std::max<uint64_t>(last_seq, e.seq());
    }
  }
  FILE* f = fdopen(fd, "a");
  if (f == nullptr) {
    const int e = errno;
    close(fd);
    return absl::InternalError(absl::StrFormat("cannot open %s: %s", path, strerror(e)));
  }
  auto log = std::unique_ptr<EventLog>(new EventLog(path, f, fsync));
  absl::MutexLock l(&log->mu_);
  log->seq_ = last_seq;
  log->good_size_ = static_cast<off_t>(keep);
  return log;
}

absl::Status CheckRunDirEmpty(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return absl::OkStatus();
    if (errno == ENOTDIR) {
      return absl::FailedPreconditionError(
          absl::StrFormat("--out=%s is a file, not a run directory", dir));
    }
    return absl::OkStatus();  // MakeDirs reports anything else
  }
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  if (names.empty()) return absl::OkStatus();
  std::sort(names.begin(), names.end());
  if (names.size() > 4) {
    names.resize(4);
    names.push_back("...");
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "--out=%s already holds a run (%s); a run never writes over another: choose another "
      "--out, or add --resume to continue an interrupted sweep there",
      dir, absl::StrJoin(names, ", ")));
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
  if (!snap.config().handler().empty()) {
    s_.handler = snap.config().handler();
    s_.handler_params_recorded = !snap.config().handler_params().empty();
    s_.handler_params.clear();
    for (const auto& kv : snap.config().handler_params()) s_.handler_params[kv.first] = kv.second;
  }
}

void SummaryBuilder::Add(const Event& e) {
  switch (e.record_case()) {
    case Event::kHeader:
      s_.scenario = e.header().scenario_name();
      s_.target = e.header().target();
      if (e.header().scenario().has_soak()) {
        const auto& soak = e.header().scenario().soak();
        s_.soak.enabled = true;
        if (soak.growth_threshold_mb() > 0) {
          s_.soak.threshold_mb = soak.growth_threshold_mb();
        }
        s_.soak.watch_interval_s = soak.watch_interval_s();
      }
      break;
    case Event::kSnapshot:
      // A watch record is not the end of a phase: it counts for the
      // maxima only.
      AddSnapshot(e.label() == "watch" ? "" : e.loadgen_phase(), e.snapshot());
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
  if (s_.soak.enabled) AddSoak(e);
}

SoakCycle& SummaryBuilder::Cycle(int cycle, int64_t at) {
  auto& v = s_.soak.cycles;
  auto it = std::lower_bound(
      v.begin(), v.end(), cycle,
      [](const SoakCycle& c, int n) { return c.cycle < n; });
  if (it == v.end() || it->cycle != cycle) {
    SoakCycle c;
    c.cycle = cycle;
    c.start_unix_nanos = at;
    it = v.insert(it, c);
  }
  it->end_unix_nanos = std::max(it->end_unix_nanos, at);
  return *it;
}

void SummaryBuilder::AddSoak(const Event& e) {
  SoakSummary& k = s_.soak;
  const int64_t at = e.unix_nanos();
  auto seen = [&](const rsslab::v1::Snapshot& snap) {
    k.last_snapshot = snap;
    k.last_snapshot_unix_nanos = at;
  };
  const std::string& phase = e.loadgen_phase();
  switch (e.record_case()) {
    case Event::kSnapshot: {
      seen(e.snapshot());
      if (e.label() == "watch") {
        ++k.watch_records;
        if (e.interval_latency().count() > 0) {
          const double p99 = e.interval_latency().p99_us();
          if (k.first_interval_p99_us < 0) k.first_interval_p99_us = p99;
          k.last_interval_p99_us = p99;
          k.max_interval_p99_us = std::max(k.max_interval_p99_us, p99);
        }
        return;
      }
      SoakCycle& c = Cycle(e.cycle(), at);
      if (!phase.empty()) c.rss[phase] = e.snapshot().status().rss_bytes();
      // Only a snapshot step in idle is "post-idle": the idle set_phase
      // record is taken as idle begins.
      if (phase == "idle") {
        c.post_idle_rss = e.snapshot().status().rss_bytes();
        c.threads = e.snapshot().status().threads();
        c.arenas = e.snapshot().memory_map().arena_count();
      }
      break;
    }
    case Event::kPhase: {
      seen(e.phase().snapshot());
      SoakCycle& c = Cycle(e.cycle(), at);
      // Later records of the phase overwrite this: the last is its end.
      if (!phase.empty()) c.rss[phase] = e.phase().snapshot().status().rss_bytes();
      break;
    }
    case Event::kTrim: {
      seen(e.trim().after());
      SoakCycle& c = Cycle(e.cycle(), at);
      if (!phase.empty()) c.rss[phase] = e.trim().after().status().rss_bytes();
      break;
    }
    case Event::kLoad: {
      SoakCycle& c = Cycle(e.cycle(), at);
      c.requests += e.load().requests_ok() + e.load().requests_failed();
      c.load_seconds += e.load().elapsed_s();
      if (hist_cycle_ != e.cycle()) {
        cycle_hist_.Reset();
        hist_cycle_ = e.cycle();
      }
      auto h = Histogram::FromProto(e.load().histogram());
      if (h.ok()) cycle_hist_.Merge(*h);
      c.p99_us = cycle_hist_.Percentile(99) / 1e3;
      break;
    }
    case Event::kServerLost:
      k.server_lost = true;
      k.lost_unix_nanos = e.server_lost().unix_nanos();
      k.lost_error = e.server_lost().error();
      if (e.server_lost().has_last_snapshot() &&
          e.server_lost().last_snapshot_unix_nanos() >= k.last_snapshot_unix_nanos) {
        k.last_snapshot = e.server_lost().last_snapshot();
        k.last_snapshot_unix_nanos = e.server_lost().last_snapshot_unix_nanos();
      }
      return;
    default:
      return;
  }
  ComputeSoakGrowth(k.threshold_mb, &k.cycles);
  k.flagged = 0;
  for (const auto& c : k.cycles) k.flagged += c.flagged ? 1 : 0;
}

void ComputeSoakGrowth(double threshold_mb, std::vector<SoakCycle>* cycles) {
  const SoakCycle* first = nullptr;
  const SoakCycle* prev = nullptr;
  const double threshold = threshold_mb * 1048576.0;
  for (SoakCycle& c : *cycles) {
    c.has_prev = false;
    c.growth_prev = c.growth_first = 0;
    c.thread_change = c.arena_change = 0;
    c.flagged = false;
    c.flag_reason.clear();
    if (c.post_idle_rss < 0) continue;  // cut short: nothing to compare
    if (first != nullptr) c.growth_first = c.post_idle_rss - first->post_idle_rss;
    if (prev != nullptr) {
      c.has_prev = true;
      c.growth_prev = c.post_idle_rss - prev->post_idle_rss;
      c.thread_change = c.threads - prev->threads;
      c.arena_change = c.arenas - prev->arenas;
      std::vector<std::string> why;
      if (c.growth_prev > threshold) {
        why.push_back(absl::StrFormat("post-idle rss +%.1f MiB > %.1f MiB",
                                      c.growth_prev / 1048576.0, threshold_mb));
      }
      if (c.thread_change > 0) {
        why.push_back(absl::StrFormat("threads +%d", c.thread_change));
      }
      c.flagged = !why.empty();
      c.flag_reason = absl::StrJoin(why, ", ");
    }
    prev = &c;
    if (first == nullptr) first = &c;
  }
}

namespace {
std::string PhaseRss(const SoakCycle& c, const char* phase) {
  auto it = c.rss.find(phase);
  return it == c.rss.end() ? "-" : Mib(it->second);
}
std::string Delta(int64_t bytes) { return absl::StrFormat("%+.1f", bytes / 1048576.0); }
double CycleQps(const SoakCycle& c) {
  return c.load_seconds > 0 ? c.requests / c.load_seconds : 0;
}
}  // namespace

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

namespace {
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
}  // namespace

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
                  "`  \nHandler: `", HandlerLabel(s), "`  \n");
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
  if (auto st = WriteFile(absl::StrCat(run_dir, "/summary.csv"), SummaryCsv(s, run_dir));
      !st.ok()) {
    return st;
  }
  if (!s.soak.enabled) return absl::OkStatus();
  return WriteFile(absl::StrCat(run_dir, "/soak_cycles.csv"), SoakCyclesCsv(s.soak));
}

std::string HandlerLabel(const RunSummary& s) {
  if (s.handler.empty()) return "-";
  std::string label = s.handler.substr(s.handler.find_last_of('/') + 1);
  if (!s.handler_params_recorded) return label + " (knobs not recorded)";
  for (const auto& kv : s.handler_params) absl::StrAppend(&label, " ", kv.first, "=", kv.second);
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
