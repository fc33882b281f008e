#include "exporter/fleet.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/metrics/process_gauges.h"
#include "common/procfs/outside_snapshot.h"
#include "common/procfs/procfs.h"
#include "grpcpp/grpcpp.h"

namespace rsslab {
namespace exporter {
namespace {

using metrics::Exposition;
using metrics::Labels;

// /proc/PID/stat's fields (all 0 when it cannot be read).
procfs::ThreadView StatOf(int pid) {
  absl::StatusOr<std::string> stat = procfs::ReadProcFile(pid, "stat");
  procfs::ThreadView v;
  if (!stat.ok() || !procfs::ParseThreadStat(absl::StripAsciiWhitespace(*stat), &v)) {
    return procfs::ThreadView();
  }
  return v;
}

int ParentOf(int pid) { return StatOf(pid).ppid; }

std::string ExeOf(int pid) {
  char buf[4096];
  ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

int OwnerOf(int pid) {
  struct stat st;
  if (stat(absl::StrCat("/proc/", pid).c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_uid);
}

// The same program: the same executable and the same command line (what a
// fork keeps). Unreadable counts as different.
bool SameProgram(int a, int b) {
  const std::string exe = ExeOf(a);
  if (exe.empty() || exe != ExeOf(b)) return false;
  absl::StatusOr<std::string> ca = procfs::ReadProcFile(a, "cmdline");
  absl::StatusOr<std::string> cb = procfs::ReadProcFile(b, "cmdline");
  return ca.ok() && cb.ok() && !ca->empty() && *ca == *cb;
}

Labels MemberLabels(const Member& m) {
  return {{"service", m.entry.service},
          {"pid", absl::StrCat(m.entry.pid)},
          {"role", m.role},
          {"allocator", m.proc.allocator()},
          {"allocator_version", m.allocator_version}};
}

std::string JsonString(absl::string_view v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

// The trims by trigger, with the package's own names: every trigger has a
// series (0 until it fires), so rate() works from the first scrape.
void AppendLedger(const rsslab::v1::Snapshot& s, const Labels& l, Exposition* e) {
  std::map<std::string, rsslab::v1::TrimTotals> by_trigger;
  for (const char* t : {"manual", "phase", "auto_after_burst", "auto_interval"}) {
    by_trigger[t].set_trigger(t);
  }
  for (const rsslab::v1::TrimTotals& t : s.trim_totals()) by_trigger[t.trigger()] = t;
  const auto with = [&l](const std::string& trigger) {
    Labels out = l;
    out.emplace_back("trigger", trigger);
    return out;
  };
  for (const auto& [trigger, t] : by_trigger) {
    const Labels lt = with(trigger);
    e->Counter("rsslab_trims_by_trigger_total", "Trims run, by trigger.", t.count(), lt);
    e->Counter("rsslab_trim_freed_bytes_total",
               "RSS given back by trims (before - after, counted when positive), by trigger.",
               t.freed_bytes(), lt);
    e->Counter("rsslab_trim_duration_seconds_total",
               "Time spent trimming (global release + per-thread pass), by trigger.",
               static_cast<double>(t.duration_us()) / 1e6, lt);
    e->Counter("rsslab_trim_worker_pause_seconds_total",
               "Sum over trims of the longest time one thread spent in its release, by trigger.",
               static_cast<double>(t.worker_pause_us()) / 1e6, lt);
    e->Gauge("rsslab_trim_longest_worker_pause_seconds",
             "The longest time one thread spent in any one trim's release, by trigger.",
             static_cast<double>(t.longest_worker_pause_us()) / 1e6, lt);
  }
}

// The recycling limits the worker's command line sets and what its
// observed growth means for them (exporter/recycling.h).
void AppendRecycling(const Member& m, const Labels& l, Exposition* e) {
  const RecyclingLimits& lim = m.recycling_limits;
  const RecyclingAdvice& a = m.recycling;
  const auto with_flag = [&l](const std::string& flag) {
    Labels out = l;
    out.emplace_back("flag", flag);
    return out;
  };
  e->Gauge("rsslab_worker_first_rss_bytes",
           "RSS at the exporter's first scrape of the worker (a fresh worker's size when the "
           "exporter saw it start).",
           m.first_rss, l);
  if (lim.max_requests > 0) {
    e->Gauge("rsslab_recycle_max_requests",
             "Requests (Celery: tasks) after which the server replaces a worker, from its "
             "command line.",
             lim.max_requests, with_flag(lim.max_requests_flag));
  }
  if (lim.max_requests_jitter > 0) {
    e->Gauge("rsslab_recycle_max_requests_jitter", "gunicorn's --max-requests-jitter.",
             lim.max_requests_jitter, l);
  }
  if (lim.rss_limit_bytes > 0) {
    e->Gauge("rsslab_recycle_rss_limit_bytes",
             "RSS above which the server replaces a worker, from its command line.",
             lim.rss_limit_bytes, with_flag(lim.rss_limit_flag));
    e->Gauge("rsslab_recycle_limit_below_fresh",
             "1 if the RSS limit is at or below the worker's first RSS: fresh workers start "
             "over their limit and are replaced after every request (they loop).",
             int64_t{a.limit_below_fresh ? 1 : 0}, l);
  }
  if (a.has_growth) {
    e->Gauge("rsslab_worker_rss_growth_per_request_bytes",
             "Growth per request: the highest RSS since the exporter's first scrape of the worker "
             "minus the RSS then, over the requests since.",
             a.growth_per_request, l);
  }
  if (a.has_suggested_max_requests) {
    e->Gauge("rsslab_recycle_suggested_max_requests",
             "Requests until the worker reaches its RSS limit (or, without one, its share of "
             "90 % of the cgroup's limit) at its observed growth per request.",
             a.suggested_max_requests, l);
  }
  if (a.has_suggested_rss_limit) {
    e->Gauge("rsslab_recycle_suggested_rss_limit_bytes",
             "The RSS a worker reaches when its max_requests (plus jitter) replaces it, at its "
             "observed growth per request.",
             a.suggested_rss_limit_bytes, l);
  }
}

// From Control: the allocator's own figures, trims and the live estimate.
void AppendControl(const Member& m, const Labels& l, Exposition* e) {
  const rsslab::v1::Snapshot& s = m.control;
  const rsslab::v1::AllocatorStats& as = s.allocator_stats();
  // Only what the allocator reports: a missing series is honest, a zero
  // would read as "nothing".
  if (as.allocated_bytes() > 0) {
    e->Gauge("rsslab_allocator_allocated_bytes", "Bytes in use according to the allocator.",
             as.allocated_bytes(), l);
  }
  if (as.resident_bytes() > 0) {
    e->Gauge("rsslab_allocator_resident_bytes", "Resident bytes according to the allocator.",
             as.resident_bytes(), l);
  }
  e->Counter("rsslab_trims_total", "Trims run (phase, manual and automatic).", s.trims_total(), l);
  e->Counter("rsslab_auto_trims_total", "Trims run by the automatic policy.",
             s.auto_trims_total(), l);
  AppendLedger(s, l, e);
  if (s.has_auto_trim()) {
    // The package's live estimate (baseline RSS plus what the allocator
    // grew by): known where automatic trimming runs.
    const int64_t live = s.status().rss_bytes() - s.auto_trim().gap_bytes();
    e->Gauge("rsslab_live_estimate_bytes",
             "The worker's live-memory estimate (RSS at start plus allocator growth).", live, l);
    e->Gauge("rsslab_retained_bytes", "RSS above the live estimate: what a trim could return.",
             s.auto_trim().gap_bytes(), l);
  }
  if (m.has_regrowth) {
    e->Gauge("rsslab_trim_regrowth_bytes",
             "RSS taken back in the minute after the last trim (highest RSS seen by the "
             "exporter's scrapes minus the trim's RSS after).",
             m.regrowth_bytes, l);
    e->Gauge("rsslab_trim_regrowth_minor_faults",
             "Minor page faults in the minute after the last trim (from the first scrape after it).",
             static_cast<int64_t>(m.regrowth_minor_faults), l);
  }
  if (m.has_burst_regrowth) {
    e->Gauge("rsslab_trim_burst_regrowth_bytes",
             "RSS taken back by the end of the first burst of requests after the last trim "
             "(highest RSS seen from the trim to the burst's end minus the trim's RSS after).",
             m.burst_regrowth_bytes, l);
    e->Gauge("rsslab_trim_burst_regrowth_minor_faults",
             "Minor page faults from the first scrape after the last trim to the end of the "
             "burst after it.",
             static_cast<int64_t>(m.burst_regrowth_minor_faults), l);
    e->Gauge("rsslab_trim_burst_requests", "Requests in the first burst after the last trim.",
             static_cast<int64_t>(m.burst_requests), l);
  }
  if (m.has_recycling) AppendRecycling(m, l, e);
  if (s.has_last_trim()) {
    const rsslab::v1::TrimResult& t = s.last_trim();
    e->Gauge("rsslab_last_trim_freed_bytes", "RSS the last trim gave back (before - after).",
             t.freed_bytes(), l);
    e->Gauge("rsslab_last_trim_max_worker_pause_seconds",
             "Longest time one thread spent in the last trim's per-thread release.",
             static_cast<double>(t.max_worker_pause_us()) / 1e6, l);
    e->Gauge("rsslab_last_trim_timestamp_seconds", "When the last trim ran (Unix time).",
             static_cast<double>(t.unix_nanos()) / 1e9, l);
  }
}

}  // namespace

RecyclingLimits LimitsOf(int pid, const registry::Trust& trust) {
  absl::StatusOr<std::string> own = procfs::ReadProcFile(pid, "cmdline");
  RecyclingLimits l = own.ok() ? ParseRecyclingLimits(*own) : RecyclingLimits();
  if (l.max_requests > 0 || l.rss_limit_bytes > 0 || !l.errors.empty()) return l;
  const int parent = ParentOf(pid);
  if (parent <= 1 || !trust.Has(OwnerOf(parent))) return l;
  absl::StatusOr<std::string> theirs = procfs::ReadProcFile(parent, "cmdline");
  return theirs.ok() ? ParseRecyclingLimits(*theirs) : l;
}

void UpdateRegrowth(const rsslab::v1::TrimResult& last, int64_t rss_now, uint64_t faults_now,
                    uint64_t requests_now, absl::Time now, Regrowth* r) {
  if (last.unix_nanos() != r->trim_unix_nanos) {
    *r = Regrowth();
    r->trim_unix_nanos = last.unix_nanos();
    r->rss_after = last.rss_after_bytes();
    r->max_rss = r->burst_max_rss = last.rss_after_bytes();
    r->faults_start = r->faults_last = faults_now;
    r->requests_last = requests_now;  // the count the next burst rises from
  }
  if (now <= absl::FromUnixNanos(r->trim_unix_nanos) + kRegrowthWindow) {
    r->max_rss = std::max(r->max_rss, rss_now);
    r->faults_last = std::max(r->faults_last, faults_now);
  }
  if (r->burst_done) return;
  r->burst_max_rss = std::max(r->burst_max_rss, rss_now);
  if (requests_now > r->requests_last) {
    if (!r->burst_started) r->burst_first_requests = r->requests_last;
    r->burst_started = true;
  } else if (r->burst_started) {  // a quiet interval: the burst is over
    r->burst_done = true;
    r->burst_faults = faults_now >= r->faults_start ? faults_now - r->faults_start : 0;
    r->burst_requests = requests_now - r->burst_first_requests;
  }
  r->requests_last = requests_now;
}

std::vector<Member> FindMasters(const std::vector<registry::Entry>& workers,
                                const registry::Trust& trust) {
  std::set<int> registered;
  for (const registry::Entry& w : workers) registered.insert(w.pid);
  std::map<int, Member> masters;
  for (const registry::Entry& w : workers) {
    const int parent = ParentOf(w.pid);
    if (parent <= 1 || registered.count(parent) > 0 || masters.count(parent) > 0) continue;
    if (!trust.Has(OwnerOf(parent)) || !SameProgram(parent, w.pid)) continue;
    Member m;
    m.role = "master";
    m.entry.pid = parent;
    m.entry.service = w.service;
    masters.emplace(parent, std::move(m));
  }
  std::vector<Member> out;
  for (auto& [pid, m] : masters) out.push_back(std::move(m));
  return out;
}

std::string AllocatorVersion(const rsslab::v1::Snapshot& s) {
  const rsslab::v1::AllocatorStats& a = s.allocator_stats();
  if (!a.jemalloc().version().empty()) return a.jemalloc().version();
  if (!a.mimalloc().version_text().empty()) return a.mimalloc().version_text();
  if (!a.tcmalloc().version().empty()) return a.tcmalloc().version();
  return a.glibc().version();
}

void AppendMembers(const std::vector<Member>& members, Exposition* e) {
  for (const Member& m : members) {
    if (!m.proc_ok) continue;  // gone since it was listed: no series
    const Labels l = MemberLabels(m);
    metrics::ProcessGauges(m.proc.status(), m.proc.memory_map(), m.proc.allocator(),
                           m.proc.allocator_library(), e, l);
    if (m.role != "worker") continue;
    e->Gauge("rsslab_control_up", "1 if the worker's Control answered this scrape in time.",
             int64_t{m.control_ok ? 1 : 0}, l);
    if (m.control_ok) AppendControl(m, l, e);
  }
}

std::string ServiceDiscoveryJson(const std::vector<Member>& members) {
  std::string out = "[";
  bool first = true;
  for (const Member& m : members) {
    if (m.role != "worker" || m.entry.metrics_address.empty()) continue;
    absl::StrAppend(&out, first ? "" : ",", "{\"targets\":[", JsonString(m.entry.metrics_address),
                    "],\"labels\":{\"service\":", JsonString(m.entry.service),
                    ",\"pid\":", JsonString(absl::StrCat(m.entry.pid)), "}}");
    first = false;
  }
  out += "]\n";
  return out;
}

void ReadProcs(std::vector<Member>* members, absl::Time now, absl::Duration interval,
               ProcReads* reads) {
  ProcReads kept;  // exited processes' are dropped
  for (Member& m : *members) {
    const std::pair<int, uint64_t> key{m.entry.pid, StatOf(m.entry.pid).start_ticks};
    auto last = reads->find(key);
    if (last != reads->end() && now - last->second.at < interval &&
        procfs::ReadStatus(m.entry.pid, last->second.snapshot.mutable_status()).ok()) {
      m.proc_ok = true;
      m.proc = last->second.snapshot;
      kept[key] = std::move(last->second);
      continue;
    }
    absl::StatusOr<rsslab::v1::Snapshot> s = procfs::OutsideSnapshot(m.entry.pid);
    m.proc_ok = s.ok();
    if (!s.ok()) continue;
    m.proc = *s;
    kept[key] = ProcRead{now, *std::move(s)};
  }
  reads->swap(kept);
}

rsslab::v1::Control::Stub* Fleet::StubFor(const std::string& address) {
  std::unique_ptr<rsslab::v1::Control::Stub>& stub = stubs_[address];
  if (stub == nullptr) stub = rsslab::v1::Control::NewStub(options_.security.Channel(address));
  return stub.get();
}

void Fleet::AskControls(std::vector<Member>* members) {
  struct Call {
    grpc::ClientContext ctx;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<rsslab::v1::Snapshot>> rpc;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Call>> calls(members->size());
  int pending = 0;
  {
    absl::MutexLock lock(&mu_);
    std::set<std::string> listed;
    for (size_t i = 0; i < members->size(); ++i) {
      Member& m = (*members)[i];
      if (m.role != "worker" || m.entry.address.empty()) continue;
      calls[i] = std::make_unique<Call>();
      calls[i]->ctx.set_deadline(absl::ToChronoTime(absl::Now() + options_.control_timeout));
      rsslab::v1::SnapshotRequest req;
      calls[i]->rpc = StubFor(m.entry.address)->AsyncGetSnapshot(&calls[i]->ctx, req, &cq);
      calls[i]->rpc->Finish(&m.control, &calls[i]->status, reinterpret_cast<void*>(i));
      ++pending;
      listed.insert(m.entry.address);
    }
    // Addresses no longer listed lose their channel (their calls are done).
    for (auto it = stubs_.begin(); it != stubs_.end();) {
      it = listed.count(it->first) > 0 ? std::next(it) : stubs_.erase(it);
    }
  }
  // Every call has a deadline, so this ends within control_timeout.
  for (; pending > 0; --pending) {
    void* tag = nullptr;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) break;
    const size_t i = reinterpret_cast<size_t>(tag);
    Member& m = (*members)[i];
    m.control_ok = ok && calls[i]->status.ok();
    if (!m.control_ok) m.control_error = calls[i]->status.error_message();
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

void Fleet::Follow(std::vector<Member>* members, absl::Time now, int64_t budget_bytes) {
  std::map<std::pair<int, uint64_t>, History> history;
  for (Member& m : *members) {
    if (m.role != "worker") continue;
    const std::pair<int, uint64_t> key{m.entry.pid, m.entry.start_ticks};
    auto known = history_.find(key);
    History h = known != history_.end() ? known->second : History();
    if (!m.proc_ok || !m.control_ok) {
      // A Control late this once keeps what was followed so far.
      if (known != history_.end()) history[key] = h;
      continue;
    }
    const int64_t rss = m.proc.status().rss_bytes();
    const uint64_t requests = m.control.requests_served();
    if (!h.seen) {
      h.seen = true;
      h.first_rss = rss;
      h.first_requests = requests;
      h.limits = LimitsOf(m.entry.pid, options_.trust);
      for (const std::string& e : h.limits.errors) {
        fprintf(stderr, "rsslab_exporter: pid %d's command line: %s\n", m.entry.pid, e.c_str());
      }
    }
    m.has_recycling = true;
    m.first_rss = h.first_rss;
    m.recycling_limits = h.limits;
    h.max_rss = std::max(h.max_rss, rss);
    m.recycling = Advise(h.limits, {h.first_rss, h.first_requests, h.max_rss, requests},
                         budget_bytes);
    if (m.control.has_last_trim()) {
      Regrowth& r = h.regrowth;
      UpdateRegrowth(m.control.last_trim(), rss, m.minor_faults, requests, now, &r);
      m.has_regrowth = true;
      m.regrowth_bytes = std::max<int64_t>(0, r.max_rss - r.rss_after);
      m.regrowth_minor_faults = r.faults_last - r.faults_start;
      m.has_burst_regrowth = r.burst_done;
      m.burst_regrowth_bytes = std::max<int64_t>(0, r.burst_max_rss - r.rss_after);
      m.burst_regrowth_minor_faults = r.burst_faults;
      m.burst_requests = r.burst_requests;
    }
    history[key] = h;
  }
  history_.swap(history);  // exited workers' are dropped
}

std::vector<Member> Fleet::Scan() {
  registry::Listing l = registry::ListAll(options_.dirs, options_.trust, /*clean=*/false);
  std::vector<Member> members = FindMasters(l.workers, options_.trust);
  for (registry::Entry& w : l.workers) {
    Member m;
    m.role = "worker";
    m.entry = std::move(w);
    members.push_back(std::move(m));
  }
  {
    absl::MutexLock lock(&mu_);
    ReadProcs(&members, absl::Now(), options_.map_interval, &proc_reads_);
  }
  AskControls(&members);
  for (Member& m : members) m.minor_faults = StatOf(m.entry.pid).minflt;  // after the calls
  int64_t budget = -1;
  const int64_t limit = options_.memory_limit ? options_.memory_limit() : -1;
  if (!l.workers.empty() && limit > 0) {
    budget = static_cast<int64_t>(0.9 * static_cast<double>(limit) /
                                  static_cast<double>(l.workers.size()));
  }
  absl::MutexLock lock(&mu_);
  Follow(&members, absl::Now(), budget);
  ignored_ = static_cast<int64_t>(l.ignored.size());
  std::map<std::pair<int, uint64_t>, std::string> versions;
  std::map<int, const Member*> by_pid;
  for (Member& m : members) {
    if (m.role != "worker") continue;
    const std::pair<int, uint64_t> key{m.entry.pid, m.entry.start_ticks};
    std::string v = m.control_ok ? AllocatorVersion(m.control) : "";
    if (v.empty() && versions_.count(key) > 0) v = versions_[key];
    if (!v.empty()) versions[key] = v;
    m.allocator_version = v;
    by_pid[ParentOf(m.entry.pid)] = &m;
  }
  versions_.swap(versions);  // exited workers' versions are dropped
  for (Member& m : members) {
    // A master's allocator is its forked workers': the same version.
    auto child = by_pid.find(m.entry.pid);
    if (m.role == "master" && child != by_pid.end() &&
        child->second->proc.allocator_library() == m.proc.allocator_library()) {
      m.allocator_version = child->second->allocator_version;
    }
  }
  return members;
}

std::string Fleet::Metrics() {
  const absl::Time start = absl::Now();
  std::vector<Member> members = Scan();
  Exposition e;
  AppendMembers(members, &e);
  int64_t workers = 0, masters = 0, answered = 0;
  for (const Member& m : members) {
    if (!m.proc_ok) continue;
    (m.role == "worker" ? workers : masters) += 1;
    answered += m.control_ok ? 1 : 0;
  }
  e.Gauge("rsslab_exporter_workers", "Registered workers found this scrape.", workers);
  e.Gauge("rsslab_exporter_masters", "Masters (the workers' forking parents) found this scrape.",
          masters);
  e.Gauge("rsslab_exporter_controls_answered", "Workers whose Control answered in time.",
          answered);
  {
    absl::MutexLock lock(&mu_);
    e.Gauge("rsslab_exporter_ignored_entries",
            "Registry entries not used (stale, malformed or another user's).", ignored_);
  }
  if (options_.extra) options_.extra(&e);
  e.Gauge("rsslab_exporter_scrape_duration_seconds", "Time this scrape took.",
          absl::ToDoubleSeconds(absl::Now() - start));
  return e.Text();
}

std::string Fleet::ServiceDiscovery() {
  // The registry alone: no /proc reads, no Control calls.
  registry::Listing l = registry::ListAll(options_.dirs, options_.trust, /*clean=*/false);
  std::vector<Member> members;
  for (registry::Entry& w : l.workers) {
    Member m;
    m.role = "worker";
    m.entry = std::move(w);
    members.push_back(std::move(m));
  }
  return ServiceDiscoveryJson(members);
}

}  // namespace exporter
}  // namespace rsslab
