#include "loadgen/runner.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/grpcpp.h"
#include "common/untrusted_text.h"
#include "common/units.h"
#include "common/procfs/service_memory.h"
#include "loadgen/http/http_engine.h"
#include "loadgen/receive_bound.h"
#include "loadgen/results/summary_render.h"

namespace rsslab {

using ::rsslab::v1::Event;

namespace {

std::string StatusText(const grpc::Status& s, int max_receive_mb) {
  return CallErrorText(s.error_code(), s.error_message(), max_receive_mb);
}

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// "set_phase, snapshot and trim steps": the kinds of steps that need the
// Control service, in the order they first appear.
void ControlKinds(const std::vector<PlanStep>& steps, std::vector<std::string>* kinds) {
  for (const PlanStep& s : steps) {
    if (s.kind == PlanStep::Kind::kRepeat) {
      ControlKinds(s.steps, kinds);
    } else if ((s.kind == PlanStep::Kind::kSetPhase || s.kind == PlanStep::Kind::kSnapshot ||
                s.kind == PlanStep::Kind::kTrim) &&
               std::find(kinds->begin(), kinds->end(), s.kind_name) == kinds->end()) {
      kinds->push_back(s.kind_name);
    }
  }
}

// The one line a run without a Control service prints: what happens to
// each kind of step that needs one.
std::string WithoutControlLine(const Plan& plan, bool outside_snapshots) {
  std::vector<std::string> kinds;
  ControlKinds(plan.steps, &kinds);
  auto has = [&](const char* k) { return std::find(kinds.begin(), kinds.end(), k) != kinds.end(); };
  std::vector<std::string> skipped;
  std::vector<std::string> parts;
  if (has("set_phase")) parts.push_back("set_phase steps only label the records");
  if (has("snapshot")) {
    if (outside_snapshots) {
      parts.push_back("snapshot steps read /proc/PID from outside");
    } else {
      skipped.push_back("snapshot");
    }
  }
  if (has("trim")) skipped.push_back("trim");
  if (!skipped.empty()) {
    parts.push_back(absl::StrCat("skipping the ", absl::StrJoin(skipped, " and "), " steps"));
  }
  if (plan.soak) parts.push_back("no soak watch stream");
  return absl::StrCat("no --control (the service runs no rsslab Control): ",
                      absl::StrJoin(parts, "; "), "; the load and wait steps run");
}

// The snapshot a Control step's record carries (set_phase's after the
// phase, trim's after the release); null for other records.
const rsslab::v1::Snapshot* RecordSnapshot(const Event& e) {
  switch (e.record_case()) {
    case Event::kSnapshot: return &e.snapshot();
    case Event::kPhase: return &e.phase().snapshot();
    case Event::kTrim: return &e.trim().after();
    default: return nullptr;
  }
}
rsslab::v1::Snapshot* MutableRecordSnapshot(Event& e) {
  switch (e.record_case()) {
    case Event::kPhase: return e.mutable_phase()->mutable_snapshot();
    case Event::kTrim: return e.mutable_trim()->mutable_after();
    default: return e.mutable_snapshot();
  }
}

}  // namespace

namespace {

std::unique_ptr<LoadDriver> MakeDriver(const Runner::Options& options) {
  if (options.http != nullptr) {
    http::HttpEngine::Options o;
    o.target = options.http;
    o.max_errors = options.max_errors;
    o.connect_timeout = options.connect_timeout;
    o.client_threads = options.client_threads;
    o.max_receive_mb = options.max_receive_mb;
    o.metrics = options.metrics;
    return std::make_unique<http::HttpEngine>(std::move(o));
  }
  LoadEngine::Options o;
  o.target = options.target;
  o.max_errors = options.max_errors;
  o.connect_timeout = options.connect_timeout;
  o.client_threads = options.client_threads;
  o.max_receive_mb = options.max_receive_mb;
  o.callback_api = options.callback_api;
  o.security = options.security;
  o.metrics = options.metrics;
  o.calls = options.calls;
  o.metadata = options.metadata;
  return std::make_unique<LoadEngine>(std::move(o));
}

}  // namespace

Runner::Runner(Options options, EventLog* log, const StopFlag* stop,
               SummaryBuilder* summary)
    : options_(std::move(options)),
      log_(log),
      stop_(stop),
      summary_(summary),
      engine_(MakeDriver(options_)) {}

Runner::~Runner() = default;

std::shared_ptr<grpc::Channel> Runner::ControlChannel(const std::string& address) const {
  grpc::ChannelArguments args;
  BoundReceive(&args, options_.max_receive_mb);
  return options_.security != nullptr
             ? options_.security->Channel(address, args)
             : grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

absl::Status Runner::ConnectControl(bool wait) {
  absl::StatusOr<registry::ControlSpec> spec = registry::ParseControlSpec(options_.control);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::vector<registry::Entry>> found = ResolveWorkers(*spec, wait);
  if (!found.ok()) return absl::UnavailableError(found.status().message());
  many_workers_ = spec->kind == registry::ControlSpec::Kind::kService;
  if (many_workers_) {
    std::vector<std::string> names;
    for (const registry::Entry& e : *found) names.push_back(registry::WorkerName(e));
    Line(absl::StrFormat("--control=%s: %d worker%s: %s", options_.control, found->size(),
                         found->size() == 1 ? "" : "s", absl::StrJoin(names, ", ")));
  }
  for (registry::Entry& e : *found) {
    std::shared_ptr<grpc::Channel> ch = ControlChannel(e.address);
    if (wait && !ch->WaitForConnected(Deadline(options_.connect_timeout))) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot reach the server's control service at %s within %s", registry::WorkerName(e),
          absl::FormatDuration(options_.connect_timeout)));
    }
    if (workers_.empty()) control_channel_ = ch;
    workers_.push_back({std::move(e), rsslab::v1::Control::NewStub(ch)});
  }
  control_ = rsslab::v1::Control::NewStub(control_channel_);
  first_worker_pid_ = many_workers_ ? workers_[0].entry.pid : 0;
  if (many_workers_) {
    std::vector<int> pids;
    for (const ControlWorker& w : workers_) pids.push_back(w.entry.pid);
    master_pid_ = procfs::FindMaster(pids);
    if (options_.check_workers != nullptr) {
      if (absl::Status c = options_.check_workers(pids); !c.ok()) return c;
    }
    Line(master_pid_ != 0
             ? absl::StrFormat("--control=%s: master pid %d (the workers' parent): the "
                               "service's memory is the master's and the workers' together",
                               options_.control, master_pid_)
             : absl::StrFormat("--control=%s: no master (the workers have no common parent "
                               "running their program): the service's memory is the workers'",
                               options_.control));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<registry::Entry>> Runner::ResolveWorkers(
    const registry::ControlSpec& spec, bool wait) {
  const int root = spec.kind == registry::ControlSpec::Kind::kService
                       ? options_.control_root_pid
                       : 0;
  // A launched program's workers import the app before they serve Control:
  // on a busy machine that takes longer than a connection.
  const absl::Duration patience =
      root != 0 ? std::max(options_.connect_timeout, kWorkersTimeout) : options_.connect_timeout;
  const absl::Time until = absl::Now() + (wait ? patience : absl::ZeroDuration());
  // A pre-fork master forks its workers one after another (gunicorn: up to
  // 0.1 s apart): the set counts once it has stayed the same for a second.
  std::vector<int> last_children;
  absl::Time settled_since = absl::InfiniteFuture();
  for (bool said = false;; said = true) {
    std::vector<registry::Ignored> ignored;
    absl::StatusOr<std::vector<registry::Entry>> found =
        registry::Resolve(spec, options_.control_trust, &ignored);
    for (const registry::Ignored& i : ignored) {
      if (said) break;  // once, not at every poll
      Line(absl::StrCat("--control=", options_.control, ": ignored ", Echo(i.path), ": ",
                        Echo(i.why), i.removed ? " (removed)" : ""));
    }
    if (root == 0) return found;
    std::vector<registry::Entry> mine;
    if (found.ok()) {
      for (registry::Entry& e : *found) {
        if (procfs::DescendsFrom(e.pid, root)) mine.push_back(std::move(e));
      }
    }
    const std::vector<int> children = procfs::ChildrenOf(root);
    const bool all = !mine.empty() && std::all_of(children.begin(), children.end(), [&](int c) {
      return std::any_of(mine.begin(), mine.end(),
                         [c](const registry::Entry& e) { return e.pid == c; });
    });
    if (!all || children != last_children) settled_since = absl::InfiniteFuture();
    if (all && settled_since == absl::InfiniteFuture()) settled_since = absl::Now();
    last_children = children;
    if (all && absl::Now() - settled_since >= absl::Seconds(1)) return mine;
    if (absl::Now() >= until) {
      if (all) return mine;
      return absl::UnavailableError(absl::StrFormat(
          "--control=%s: %d of the %d processes pid %d started registered their Control "
          "within %s (each worker must call rsslab.serve(); the service's name must be %s)",
          options_.control, mine.size(), children.size(), root, absl::FormatDuration(patience),
          spec.service));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void Runner::Stamp(const ControlWorker& w, Event* e) const {
  if (!many_workers_) return;
  e->set_worker_pid(w.entry.pid);
  e->set_worker_control(w.entry.address);
}

Runner::StepDone Runner::EachWorker(const Ctx& ctx,
                                    const std::function<StepDone(const ControlWorker&)>& one) {
  if (workers_.size() == 1 && !many_workers_) return one(workers_[0]);
  std::vector<std::string> details, failures;
  std::vector<rsslab::v1::Snapshot> snaps;
  Event first;
  for (const ControlWorker& w : workers_) {
    StepDone d = one(w);
    if (d.status.ok()) {
      details.push_back(absl::StrCat("pid ", w.entry.pid, " ", d.detail));
      if (snaps.empty()) first = d.record;
      if (const rsslab::v1::Snapshot* s = RecordSnapshot(d.record)) snaps.push_back(*s);
    } else {
      failures.push_back(std::string(d.status.message()));
    }
  }
  StepDone done{absl::OkStatus(), absl::StrCat(workers_.size(), " workers: ",
                                               absl::StrJoin(details, "; "))};
  if (!failures.empty()) {
    done.status = absl::UnavailableError(absl::StrFormat(
        "%d of %d workers failed: %s", failures.size(), workers_.size(),
        absl::StrJoin(failures, "; ")));
    return done;
  }
  absl::StatusOr<rsslab::v1::Snapshot> svc = ServiceNow(snaps);
  if (!svc.ok()) return {svc.status(), done.detail};
  first.clear_worker_pid();
  first.clear_worker_control();
  *MutableRecordSnapshot(first) = *svc;
  const rsslab::v1::ServiceMemory& m = svc->service();
  done.detail = absl::StrFormat("service %.1f MiB rss, %s MiB pss over %d processes; %s",
                                m.rss_bytes() / 1048576.0,
                                m.pss_bytes() < 0 ? std::string("-")
                                                  : absl::StrFormat("%.1f", m.pss_bytes() / 1048576.0),
                                m.processes_size(), done.detail);
  done.status = Append(std::move(first), ctx);
  return done;
}

absl::StatusOr<rsslab::v1::Snapshot> Runner::ServiceNow(
    const std::vector<rsslab::v1::Snapshot>& workers) const {
  std::vector<int> pids;
  for (const ControlWorker& w : workers_) pids.push_back(w.entry.pid);
  absl::StatusOr<rsslab::v1::ServiceMemory> m = procfs::ReadServiceMemory(master_pid_, pids);
  if (!m.ok()) return m.status();
  return procfs::ServiceSnapshot(*m, workers);
}

void Runner::Line(const std::string& text) {
  PrintProgressLine(options_.progress, options_.line_prefix + text);
}

void Runner::Saw(const rsslab::v1::Snapshot& snap) {
  if (options_.metrics != nullptr) options_.metrics->ServerSnapshot(snap);
}

void Runner::SetState(const Ctx& ctx) {
  absl::MutexLock l(&mu_);
  cur_phase_ = ctx.phase;
  cur_cycle_ = ctx.cycle;
}

absl::Status Runner::Append(Event e, const Ctx& ctx) {
  e.set_loadgen_phase(ctx.phase);
  e.set_cycle(ctx.cycle);
  return AppendLocked(std::move(e));
}

absl::Status Runner::AppendLocked(Event e) {
  if (!options_.tag.cell().empty()) {
    e.set_cell(options_.tag.cell());
    e.set_profile(options_.tag.profile());
    e.set_threads(options_.tag.threads());
    e.set_repeat(options_.tag.repeat());
    if (options_.tag.has_cell_index()) e.set_cell_index(options_.tag.cell_index());
    e.set_attempt(options_.tag.attempt());
  }
  // --control=all:NAME: every worker's records go to the log; the summary
  // and the fill check follow the service's record (EachWorker).
  if (e.worker_pid() != 0) {
    absl::MutexLock l(&mu_);
    return log_->Append(std::move(e));
  }
  absl::MutexLock l(&mu_);
  // The fill check reads the server's cache statistics, which a service
  // without the Control service (skip_control_) has none of.
  std::optional<rsslab::v1::FillCheck> fill =
      skip_control_ ? std::nullopt : fill_watch_.Add(e);
  if (fill_watch_.off() && !fill_off_said_) {
    fill_off_said_ = true;
    fprintf(stderr, "%s%srsslab_loadgen: %s\n",
            options_.progress == ProgressMode::kLive ? "\r\033[K" : "",
            options_.line_prefix.c_str(), kFillCheckOff);
  }
  const Event fill_record = fill ? FillCheckRecord(*fill, e) : Event();
  if (summary_ != nullptr) summary_->Add(e);
  absl::Status s = log_->Append(std::move(e));
  if (!fill) return s;
  if (!fill->filled()) {  // whatever the progress mode: the run is not seed 000's
    fprintf(stderr, "%s%srsslab_loadgen: %s\n",
            options_.progress == ProgressMode::kLive ? "\r\033[K" : "",
            options_.line_prefix.c_str(), fill->verdict().c_str());
  }
  if (summary_ != nullptr) summary_->Add(fill_record);
  return s.ok() ? log_->Append(fill_record) : s;
}

void Runner::StartWatch(double interval) {
  watch_ctx_ = std::make_unique<grpc::ClientContext>();
  watch_stopping_ = false;
  watch_interval_s_ = interval;
  watch_ended_ = std::make_unique<absl::Notification>();
  watch_ = std::thread([this, interval] {
    if (many_workers_) {
      WatchServiceLoop(interval);
    } else {
      WatchLoop(interval);
    }
  });
}

void Runner::StopWatch(bool failed) {
  if (!watch_.joinable()) return;
  if (failed) {
    // A dead server ends the stream within moments (the connection drops);
    // a live one keeps streaming, so this costs one interval at most.
    watch_ended_->WaitForNotificationWithTimeout(
        absl::Seconds(watch_interval_s_) + absl::Seconds(2));
  }
  watch_stopping_ = true;
  watch_ctx_->TryCancel();
  watch_.join();
}

int64_t Runner::WatchRecord(rsslab::v1::Snapshot snap) {
  Event e;
  e.set_label("watch");
  const rsslab::v1::Latency lat = engine_->TakeInterval();
  if (lat.count() > 0) *e.mutable_interval_latency() = lat;
  const int64_t at = absl::ToUnixNanos(absl::Now());
  e.set_unix_nanos(at);
  Saw(snap);
  *e.mutable_snapshot() = std::move(snap);
  {
    absl::MutexLock l(&mu_);
    e.set_loadgen_phase(cur_phase_);
    e.set_cycle(cur_cycle_);
    if (lat.count() > 0) step_intervals_.push_back(lat);
  }
  // A failed write is reported by the main thread's next append too;
  // the watch keeps going so a transient failure loses one record.
  (void)AppendLocked(std::move(e));
  return at;
}

void Runner::WatchLoop(double interval_s) {
  rsslab::v1::WatchRequest req;
  req.set_interval_ms(std::max<int64_t>(1, std::llround(interval_s * 1000)));
  // No gc: a gc.collect() every few seconds would change the memory the
  // soak is watching.
  req.set_gc(false);
  std::unique_ptr<grpc::ClientReader<rsslab::v1::Snapshot>> reader =
      control_->WatchSnapshots(watch_ctx_.get(), req);
  rsslab::v1::Snapshot snap;
  rsslab::v1::Snapshot last;
  int64_t last_at = 0;
  while (reader->Read(&snap)) {
    last = snap;
    last_at = WatchRecord(std::move(snap));
    snap.Clear();
  }
  const grpc::Status st = reader->Finish();
  watch_ended_->Notify();
  // We cancelled it: the run is over. (A stream that broke for another
  // reason meanwhile is still a lost server.)
  if (watch_stopping_ && st.error_code() == grpc::StatusCode::CANCELLED) return;
  // The stream ended on the server's side: it died or shut down.
  Lost(st.ok() ? "the server ended the watch stream" : StatusText(st, options_.max_receive_mb),
       last, last_at);
}

void Runner::WatchServiceLoop(double interval_s) {
  // No Control stream covers a whole service (the master has none): every
  // process is read from /proc, each interval, without a gc.
  const absl::Duration every = absl::Seconds(interval_s);
  rsslab::v1::Snapshot last;
  int64_t last_at = 0;
  std::string lost;
  while (!watch_stopping_) {
    const absl::Time next = absl::Now() + every;
    absl::StatusOr<rsslab::v1::Snapshot> snap = ServiceNow({});
    if (!snap.ok()) {
      lost = std::string(snap.status().message());
      break;
    }
    last = *snap;
    last_at = WatchRecord(*std::move(snap));
    while (!watch_stopping_ && absl::Now() < next) {
      absl::SleepFor(std::min(absl::Milliseconds(50), next - absl::Now()));
    }
  }
  watch_ended_->Notify();
  if (!lost.empty()) Lost(lost, last, last_at);
}

void Runner::Lost(const std::string& error, const rsslab::v1::Snapshot& last, int64_t last_at) {
  // Record when, and the last thing seen, before the main thread notices.
  Event e;
  auto* lost = e.mutable_server_lost();
  const int64_t now = absl::ToUnixNanos(absl::Now());
  lost->set_unix_nanos(now);
  lost->set_error(error);
  if (last_at != 0) {
    *lost->mutable_last_snapshot() = last;
    lost->set_last_snapshot_unix_nanos(last_at);
  }
  e.set_label("server_lost");
  {
    absl::MutexLock l(&mu_);
    e.set_loadgen_phase(cur_phase_);
    e.set_cycle(cur_cycle_);
  }
  const std::string text = absl::StrFormat(
      "[soak] SERVER LOST at %s: %s; last watch snapshot %s",
      absl::FormatTime("%H:%M:%S", absl::FromUnixNanos(now), absl::UTCTimeZone()), error,
      last_at == 0 ? std::string("none")
                   : absl::StrFormat("rss %.1f MiB, %d threads",
                                     last.status().rss_bytes() / 1048576.0,
                                     last.status().threads()));
  (void)AppendLocked(std::move(e));
  Line(text);
}

void Runner::CycleLine(int cycle) {
  std::string text;
  {
    absl::MutexLock l(&mu_);
    if (summary_ == nullptr) return;
    for (const SoakCycle& c : summary_->summary().soak.cycles) {
      if (c.cycle == cycle) text = SoakCycleLine(c);
    }
  }
  if (!text.empty()) Line(absl::StrCat("[soak] ", text));
}

absl::Status Runner::Run(const Plan& plan) {
  if (plan.needs_control && options_.control.empty()) {
    // The user's own service without the rsslab package: the load and wait
    // steps still run; what needs the Control service is said once.
    skip_control_ = true;
    Line(WithoutControlLine(plan, options_.outside_snapshot != nullptr));
  } else if (plan.needs_control) {
    if (absl::Status s = ConnectControl(/*wait=*/true); !s.ok()) return s;
  } else if (options_.progress == ProgressMode::kLive &&
             !options_.control.empty()) {
    // Load-only scenario: the control service is optional, but the live
    // line shows the server's RSS when it answers (best effort, no wait).
    if (!ConnectControl(/*wait=*/false).ok()) control_ = nullptr;
  }
  soak_ = plan.soak;
  Ctx ctx;
  if (plan.soak && !skip_control_) {
    if (control_ == nullptr) {
      return absl::InvalidArgumentError("a soak needs --control (it watches snapshots)");
    }
    StartWatch(plan.watch_interval_s);
  }
  absl::Status s = RunSteps(plan.steps, ctx, "");
  StopWatch(!s.ok() && !absl::IsCancelled(s));
  return s;
}

absl::Status Runner::RunSteps(const std::vector<PlanStep>& steps, Ctx& ctx,
                              const std::string& prefix) {
  for (size_t i = 0; i < steps.size(); ++i) {
    if (stop_ != nullptr && stop_->stopped()) {
      return absl::CancelledError("interrupted");
    }
    const std::string label =
        absl::StrFormat("%s%d/%d", prefix, i + 1, steps.size());
    absl::Status s = RunStep(steps[i], ctx, label);
    if (!s.ok()) return s;
    if (prefix.empty()) ++steps_done_;  // the top level (a repeat's cycles have a prefix)
  }
  return absl::OkStatus();
}

absl::Status Runner::RunStep(const PlanStep& step, Ctx& ctx, const std::string& label) {
  const absl::Time start = absl::Now();
  if (options_.metrics != nullptr) {
    options_.metrics->StepStarted(label, step.name, step.kind_name, ctx.cycle);
  }
  StepDone done;
  const bool control_step = step.kind == PlanStep::Kind::kSetPhase ||
                            step.kind == PlanStep::Kind::kSnapshot ||
                            step.kind == PlanStep::Kind::kTrim;
  if (control_step && skip_control_) {
    done = WithoutControl(step, ctx);
  } else {
  switch (step.kind) {
    case PlanStep::Kind::kSetPhase: done = SetPhase(step, ctx); break;
    case PlanStep::Kind::kSnapshot: done = Snapshot(step, ctx); break;
    case PlanStep::Kind::kTrim: done = Trim(step, ctx); break;
    case PlanStep::Kind::kWait: done = Wait(step); break;
    case PlanStep::Kind::kLoad: done = Load(step, ctx, label); break;
    case PlanStep::Kind::kRepeat: done = Repeat(step, ctx, label, start); break;
  }
  }
  const absl::Status& status = done.status;
  const std::string& detail = done.detail;

  Event srec;
  auto* sr = srec.mutable_step();
  sr->set_step(step.name);
  sr->set_kind(step.kind_name);
  sr->set_start_unix_nanos(absl::ToUnixNanos(start));
  sr->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  sr->set_ok(status.ok());
  if (!status.ok()) sr->set_error(std::string(status.message()));
  if (options_.metrics != nullptr) options_.metrics->StepEnded(status.ok());
  srec.set_label(step.name);
  absl::Status ws = Append(srec, ctx);
  Line(absl::StrFormat("[%s] %s: %s %s%s", label, step.name, step.kind_name,
                       status.ok() ? "ok" : "FAILED",
                       status.ok() ? (detail.empty() ? "" : ": " + detail)
                                   : ": " + std::string(status.message()) +
                                         (detail.empty() ? "" : " (" + detail + ")")));
  return status.ok() ? ws : status;
}

Runner::StepDone Runner::SetPhase(const PlanStep& step, Ctx& ctx) {
  rsslab::v1::SetPhaseRequest req;
  req.set_phase(step.set_phase.phase());
  if (step.set_phase.has_cache_limit_mb()) {
    // Range-checked when the scenario was validated (loadgen/scenario.cc,
    // 0..kMaxCacheLimitMb), so the product cannot overflow.
    req.set_cache_limit_bytes(step.set_phase.cache_limit_mb() * kMiB);
  }
  req.set_gc(step.set_phase.has_gc() ? step.set_phase.gc() : true);
  return EachWorker(ctx, [&](const ControlWorker& w) -> StepDone {
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(options_.control_timeout));
    rsslab::v1::SetPhaseResponse resp;
    grpc::Status gs = w.stub->SetPhase(&cc, req, &resp);
    if (!gs.ok()) {
      return {absl::UnavailableError(absl::StrFormat("SetPhase(%s) at %s failed: %s",
                                                     req.phase(), registry::WorkerName(w.entry),
                                                     StatusText(gs, options_.max_receive_mb))),
              ""};
    }
    ctx.phase = req.phase();
    SetState(ctx);
    Saw(resp.snapshot());
    Event rec;
    rec.set_label(step.name);
    Stamp(w, &rec);
    *rec.mutable_phase() = resp;
    StepDone done{Append(rec, ctx), "", rec};
    done.detail =
        absl::StrFormat("rss %.1f MiB", resp.snapshot().status().rss_bytes() / 1048576.0);
    if (!resp.no_callback().empty()) {
      // A service with no cache: the phase labelled the records, nothing ran.
      // The service's sentence once per phase, a short mark after that.
      done.detail += no_callback_said_.insert(req.phase()).second
                         ? "; no callback ran: " + Echo(resp.no_callback(), 512)
                         : "; no callback ran";
    }
    if (resp.has_trim()) {
      absl::StrAppendFormat(&done.detail, " (before %.1f MiB, %s took %d us)",
                            resp.before().status().rss_bytes() / 1048576.0,
                            resp.trim().call(), resp.trim().trim_duration_us());
    }
    return done;
  });
}

Runner::StepDone Runner::Snapshot(const PlanStep& step, const Ctx& ctx) {
  rsslab::v1::SnapshotRequest req;
  req.set_gc(step.snapshot.has_gc() ? step.snapshot.gc() : true);
  req.set_detail(step.snapshot.detail());
  return EachWorker(ctx, [&](const ControlWorker& w) -> StepDone {
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(options_.control_timeout));
    rsslab::v1::Snapshot snap;
    grpc::Status gs = w.stub->GetSnapshot(&cc, req, &snap);
    if (!gs.ok()) {
      return {absl::UnavailableError(absl::StrFormat("GetSnapshot at %s failed: %s",
                                                     registry::WorkerName(w.entry),
                                                     StatusText(gs, options_.max_receive_mb))),
              ""};
    }
    Saw(snap);
    Event rec;
    rec.set_label(step.name);
    Stamp(w, &rec);
    *rec.mutable_snapshot() = snap;
    return {Append(rec, ctx),
            absl::StrFormat("rss %.1f MiB, hwm %.1f MiB, %d threads, %d arenas",
                            snap.status().rss_bytes() / 1048576.0,
                            snap.status().hwm_bytes() / 1048576.0, snap.status().threads(),
                            snap.memory_map().arena_count()),
            rec};
  });
}

Runner::StepDone Runner::Trim(const PlanStep& step, const Ctx& ctx) {
  rsslab::v1::TrimRequest req;
  req.set_mode(step.trim.mode());
  req.set_gc(true);
  return EachWorker(ctx, [&](const ControlWorker& w) -> StepDone {
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(options_.control_timeout));
    rsslab::v1::TrimResponse resp;
    grpc::Status gs = w.stub->Trim(&cc, req, &resp);
    if (!gs.ok()) {
      return {absl::UnavailableError(absl::StrFormat(
                  "Trim at %s failed: %s", registry::WorkerName(w.entry), StatusText(gs, options_.max_receive_mb))),
              ""};
    }
    Saw(resp.after());
    Event rec;
    rec.set_label(step.name);
    Stamp(w, &rec);
    *rec.mutable_trim() = resp;
    return {Append(rec, ctx),
            absl::StrFormat("rss %.1f MiB", resp.after().status().rss_bytes() / 1048576.0),
            rec};
  });
}

Runner::StepDone Runner::WithoutControl(const PlanStep& step, Ctx& ctx) {
  if (step.kind == PlanStep::Kind::kSetPhase) {
    // The service cannot be told; the records after it still say which
    // part of the scenario they belong to.
    ctx.phase = step.set_phase.phase();
    SetState(ctx);
    return {absl::OkStatus(), "phase label only (no Control service)"};
  }
  if (step.kind == PlanStep::Kind::kSnapshot && options_.outside_snapshot != nullptr) {
    absl::StatusOr<rsslab::v1::Snapshot> snap = options_.outside_snapshot();
    if (!snap.ok()) {
      return {absl::UnavailableError(absl::StrCat("snapshot from /proc: ", snap.status().message())),
              ""};
    }
    Saw(*snap);
    Event rec;
    rec.set_label(step.name);
    *rec.mutable_snapshot() = *snap;
    return {Append(rec, ctx),
            absl::StrFormat("from /proc: rss %.1f MiB, hwm %.1f MiB, %d threads",
                            snap->status().rss_bytes() / 1048576.0,
                            snap->status().hwm_bytes() / 1048576.0, snap->status().threads())};
  }
  return {absl::OkStatus(), "skipped (no Control service)"};
}

Runner::StepDone Runner::Wait(const PlanStep& step) {
  StepDone done{absl::OkStatus(), absl::StrFormat("%.1f s", step.wait_s)};
  if (stop_ == nullptr) {
    absl::SleepFor(absl::Seconds(step.wait_s));
  } else if (stop_->WaitFor(absl::Seconds(step.wait_s))) {
    done.status = absl::CancelledError("interrupted");
  }
  return done;
}

Runner::StepDone Runner::Load(const PlanStep& step, const Ctx& ctx,
                              const std::string& label) {
  const rsslab::v1::LoadSpec& spec = step.load;
  Line(absl::StrFormat(
      "[%s] %s: load started (%s, %s)", label, step.name,
      spec.rate() > 0
          ? absl::StrFormat("open loop %.0f/s %s, %d %s", spec.rate(), spec.arrival(),
                            spec.channels(), options_.http != nullptr ? "connections" : "channels")
          : absl::StrFormat("closed loop %d outstanding over %d %s", spec.concurrency(),
                            spec.channels(),
                            options_.http != nullptr ? "connections" : "channels"),
      spec.requests() > 0 ? absl::StrFormat("%d requests", spec.requests())
                          : absl::StrFormat("%.1f s", spec.duration_s())));
  {
    absl::MutexLock l(&mu_);
    step_intervals_.clear();
  }
  LoadResult r;
  {
    std::optional<ProgressLine> live;
    if (options_.progress == ProgressMode::kLive) {
      ProgressLine::RssFn rss;
      if (control_ != nullptr) {
        rss = [this] {
          rsslab::v1::SnapshotRequest req;  // no gc: must not disturb
          grpc::ClientContext cc;
          cc.set_deadline(Deadline(absl::Seconds(1)));
          rsslab::v1::Snapshot snap;
          if (!control_->GetSnapshot(&cc, req, &snap).ok()) return -1.0;
          Saw(snap);
          return snap.status().rss_bytes() / 1048576.0;
        };
      }
      live.emplace(label, step.name, [this] { return engine_->Progress(); }, std::move(rss));
    }
    r = engine_->Run(spec, step.name, stop_);
  }
  Event rec;
  rec.set_label(step.name);
  *rec.mutable_load() = r.summary;
  {
    absl::MutexLock l(&mu_);
    for (auto& i : step_intervals_) *rec.mutable_load()->add_intervals() = i;
    step_intervals_.clear();
    // Only for soaks (a watch took the earlier ones): a plain run's
    // total is its only interval.
    if (watch_.joinable() && r.tail_interval.count() > 0) {
      *rec.mutable_load()->add_intervals() = r.tail_interval;
    }
  }
  absl::Status ws = Append(rec, ctx);
  StepDone done{r.status.ok() ? ws : r.status, ""};
  const auto& l = r.summary.latency();
  done.detail = absl::StrFormat(
      "%d ok, %d failed, %.0f qps, p50 %.2f ms, p99 %.2f ms, max %.2f ms",
      r.summary.requests_ok(), r.summary.requests_failed(), r.summary.qps(),
      l.p50_us() / 1000, l.p99_us() / 1000, l.max_us() / 1000);
  if (r.summary.mode() == "open") {
    absl::StrAppendFormat(&done.detail, ", %d late sends (max lag %.2f ms)",
                          r.summary.behind_schedule(),
                          r.summary.max_schedule_lag_us() / 1000);
    if (r.summary.not_sent() > 0) {
      absl::StrAppendFormat(&done.detail, ", %d not sent (due after the client fell behind)",
                            r.summary.not_sent());
    }
  }
  return done;
}

Runner::StepDone Runner::Repeat(const PlanStep& step, Ctx& ctx, const std::string& label,
                                absl::Time start) {
  const absl::Time from =
      options_.repeat_started != absl::InfinitePast() ? options_.repeat_started : start;
  const absl::Time until =
      step.duration_s > 0 ? from + absl::Seconds(step.duration_s) : absl::InfiniteFuture();
  const int outer_cycle = ctx.cycle;
  // Records after the loop (its own step record, late watch records)
  // belong to no cycle: the phase goes back to what it was too.
  const std::string outer_phase = ctx.phase;
  StepDone done;
  for (uint32_t c = static_cast<uint32_t>(options_.first_cycle);
       step.times == 0 || c < step.times; ++c) {
    if (absl::Now() >= until) break;
    ctx.cycle = static_cast<int>(c);
    SetState(ctx);
    done.status = RunSteps(step.steps, ctx, absl::StrFormat("%s cycle %d: ", label, c + 1));
    if (!done.status.ok()) break;
    if (soak_) CycleLine(ctx.cycle);
  }
  ctx.cycle = outer_cycle;
  ctx.phase = outer_phase;
  SetState(ctx);
  return done;
}

}  // namespace rsslab
