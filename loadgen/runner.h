// Executes a plan's steps (plan.h) against a server's Load and Control
// services, writing every record to the run's EventLog as it happens.
//
//   rsslab::Runner::Options o;  o.target = ...; o.control = ...;
//   rsslab::Runner runner(o, log.get(), &stop, &summary_builder);
//   absl::Status s = runner.Run(plan);   // first failure, if any
//
// A failed step ends the run (later steps would measure a broken server);
// a stop request (SIGINT/SIGTERM) ends the current step gracefully and
// returns CANCELLED.
#ifndef RSSLAB_LOADGEN_RUNNER_H_
#define RSSLAB_LOADGEN_RUNNER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "registry/registry.h"
#include "loadgen/engine.h"
#include "loadgen/http/http_target.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/fill_check.h"
#include "loadgen/plan.h"
#include "loadgen/progress_line.h"
#include "loadgen/results/summary.h"
#include "proto/control.grpc.pb.h"

namespace rsslab {

// How long a launched pre-fork program's workers may take to register.
inline constexpr absl::Duration kWorkersTimeout = absl::Seconds(30);

class Runner {
 public:
  using ProgressMode = ::rsslab::ProgressMode;
  struct Options {
    std::string target = "127.0.0.1:50051";
    std::string control = "127.0.0.1:50052";
    rsslab::v1::LoadSpec flags;  // the command line's load layer
    uint64_t max_errors = 0;
    absl::Duration connect_timeout = absl::Seconds(5);
    int client_threads = 0;  // LoadEngine::Options::client_threads
    // LoadEngine::Options::max_receive_mb, also the Control channel's bound.
    int max_receive_mb = kDefaultMaxReceiveMb;
    bool callback_api = true;  // LoadEngine::Options::callback_api
    absl::Duration control_timeout = absl::Seconds(60);
    ProgressMode progress = ProgressMode::kLines;
    // Sweep cell tag (cell, profile, threads, repeat) stamped on every
    // record, so one events.jsonl can hold a whole matrix.
    rsslab::v1::Event tag;
    // Prefixes progress lines (e.g. "glibc/t4/r1 ").
    std::string line_prefix;
    // TLS and bearer token for every channel (not owned; null = plaintext).
    const Security* security = nullptr;
    // Whose registry entries --control=all:NAME / pid:PID believes (the
    // token goes to no one else): registry::CheckTrusted.
    registry::Trust control_trust = registry::Trust::Self();
    // --metrics_listen: progress for Prometheus (not owned; may be null).
    LoadgenMetrics* metrics = nullptr;
    // LoadEngine::Options::calls and ::metadata (the user's own service).
    const CallSet* calls = nullptr;
    std::vector<std::pair<std::string, std::string>> metadata;
    // An HTTP server's requests (--target=http://...): load steps go to it
    // through the HTTP call kind instead of gRPC; null for gRPC.
    std::shared_ptr<const http::Target> http;
    // Without a Control service: snapshot steps read the process from
    // outside through this (the agent's ProcSnapshot, /proc/PID); empty:
    // they are skipped too.
    std::function<absl::StatusOr<rsslab::v1::Snapshot>()> outside_snapshot;
    // --control=all:NAME for a program this loadgen launched (a sweep
    // cell's pre-fork server): only workers descending from this pid are
    // the service's, and the run waits (up to connect_timeout) until every
    // child of it is registered and no new one came for a second (up to
    // kWorkersTimeout, or connect_timeout if longer). 0: any registered
    // worker of NAME.
    int control_root_pid = 0;
    // Called with the workers' pids once they are found (a sweep cell:
    // each worker runs under the cell's profile); an error fails the run.
    std::function<absl::Status(const std::vector<int>& pids)> check_workers;
    // A resumed soak (--resume): repeat steps number their cycles from
    // `first_cycle` and end `duration_s` after `repeat_started` (the
    // interrupted run's start), not after this run's.
    int first_cycle = 0;
    absl::Time repeat_started = absl::InfinitePast();
  };

  // `log`, `stop` and `summary` must outlive the runner; every appended
  // event is also fed to `summary`.
  Runner(Options options, EventLog* log, const StopFlag* stop,
         SummaryBuilder* summary);
  ~Runner();

  absl::Status Run(const Plan& plan);
  // The plan's top-level steps that finished ok in Run (a sweep cell's
  // "after N of M steps").
  int steps_done() const { return steps_done_; }

 private:
  // The phase and cycle the main thread is in, stamped on its records.
  struct Ctx {
    std::string phase;  // the phase this loadgen last set
    int cycle = 0;
  };
  // What a step did, for its progress line (the records are written).
  struct StepDone {
    absl::Status status;
    std::string detail;
    // A Control step's record on one worker (--control=all:NAME): the
    // service's record is made from the workers' (EachWorker).
    rsslab::v1::Event record;
  };
  absl::Status RunSteps(const std::vector<PlanStep>& steps, Ctx& ctx,
                        const std::string& prefix);
  // One step: its kind's method, then its step record and progress line.
  absl::Status RunStep(const PlanStep& step, Ctx& ctx, const std::string& label);
  StepDone SetPhase(const PlanStep& step, Ctx& ctx);
  StepDone Snapshot(const PlanStep& step, const Ctx& ctx);
  // No Control service: set_phase only labels the records that follow,
  // snapshot goes to options_.outside_snapshot (or is skipped), trim is
  // skipped.
  StepDone WithoutControl(const PlanStep& step, Ctx& ctx);
  StepDone Trim(const PlanStep& step, const Ctx& ctx);
  // One Control service of the run: the --control address, or each live
  // worker of a service (--control=all:NAME, registry/registry.h).
  struct ControlWorker {
    registry::Entry entry;
    std::unique_ptr<rsslab::v1::Control::Stub> stub;
  };
  // Resolves --control into workers_ and connects to each (within
  // connect_timeout when `wait`).
  absl::Status ConnectControl(bool wait);
  // The registered workers (control_root_pid: only its descendants, all of
  // its children, waited for).
  absl::StatusOr<std::vector<registry::Entry>> ResolveWorkers(const registry::ControlSpec& spec,
                                                              bool wait);
  // Runs `one` for every worker: a worker that fails does not stop the
  // others; the step fails naming each that did, after the others'
  // records are written. When all answered, one more record, the
  // service's: the first worker's with its snapshot replaced by the
  // service's (ServiceRecord).
  StepDone EachWorker(const Ctx& ctx, const std::function<StepDone(const ControlWorker&)>& one);
  // The service's memory now (master + workers from /proc) as a snapshot,
  // with the workers' own snapshots for what /proc does not show.
  absl::StatusOr<rsslab::v1::Snapshot> ServiceNow(
      const std::vector<rsslab::v1::Snapshot>& workers) const;
  // Soak of a service: the watch reads every process from /proc.
  void WatchServiceLoop(double interval_s);
  // Marks a record with the worker it came from (--control=all:NAME).
  void Stamp(const ControlWorker& w, rsslab::v1::Event* e) const;
  StepDone Wait(const PlanStep& step);
  StepDone Load(const PlanStep& step, const Ctx& ctx, const std::string& label);
  StepDone Repeat(const PlanStep& step, Ctx& ctx, const std::string& label,
                  absl::Time start);
  absl::Status Append(rsslab::v1::Event e, const Ctx& ctx);
  // Soak: records WatchSnapshots on its own thread until StopWatch().
  void StartWatch(double interval_s);
  // `failed`: the run ended on an error, perhaps because the server died;
  // give the stream a moment to end by itself so the loss is recorded.
  void StopWatch(bool failed);
  void WatchLoop(double interval_s);
  // Appends one watch record (with the latency since the last); returns
  // its time.
  int64_t WatchRecord(rsslab::v1::Snapshot snap);
  // The watch ended on the server's side: a server_lost record and line.
  void Lost(const std::string& error, const rsslab::v1::Snapshot& last, int64_t last_at);
  absl::Status AppendLocked(rsslab::v1::Event e) ABSL_LOCKS_EXCLUDED(mu_);
  void SetState(const Ctx& ctx) ABSL_LOCKS_EXCLUDED(mu_);
  void CycleLine(int cycle) ABSL_LOCKS_EXCLUDED(mu_);
  void Line(const std::string& text);
  // Feeds the last server RSS seen to --metrics_listen.
  void Saw(const rsslab::v1::Snapshot& snap);
  std::shared_ptr<grpc::Channel> ControlChannel(const std::string& address) const;

  Options options_;
  EventLog* log_;
  const StopFlag* stop_;
  SummaryBuilder* summary_;
  // The call kind's driver: gRPC (LoadEngine) or HTTP (http::HttpEngine).
  std::unique_ptr<LoadDriver> engine_;
  std::shared_ptr<grpc::Channel> control_channel_;
  std::unique_ptr<rsslab::v1::Control::Stub> control_;  // the first worker's: live line, watch
  std::vector<ControlWorker> workers_;
  bool many_workers_ = false;  // --control=all:NAME
  int first_worker_pid_ = 0;  // its records feed the summary and the fill check
  // --control=all:NAME: the workers' master (procfs::FindMaster), 0: none.
  int master_pid_ = 0;
  bool soak_ = false;  // the plan being run is a soak
  int steps_done_ = 0;  // top-level steps finished ok
  // No Control service (--control empty, a service without the rsslab
  // package): set_phase, snapshot and trim steps are skipped, said once.
  bool skip_control_ = false;

  // The main thread and the watch thread both append: the summary builder
  // is not thread-safe, and watch records are stamped with the phase and
  // cycle the main thread is in.
  absl::Mutex mu_;
  std::string cur_phase_ ABSL_GUARDED_BY(mu_);
  int cur_cycle_ ABSL_GUARDED_BY(mu_) = 0;
  FillWatch fill_watch_ ABSL_GUARDED_BY(mu_);  // says once if the fill never filled
  bool fill_off_said_ ABSL_GUARDED_BY(mu_) = false;
  // Phases whose "no callback ran" answer was printed in full (step thread).
  std::set<std::string> no_callback_said_;
  // Interval latencies taken during the running load step (its summary's
  // `intervals`); bounded by the step's length / the watch interval.
  std::vector<rsslab::v1::Latency> step_intervals_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<grpc::ClientContext> watch_ctx_;
  std::atomic<bool> watch_stopping_{false};
  double watch_interval_s_ = 0;
  std::unique_ptr<absl::Notification> watch_ended_;
  std::thread watch_;
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUNNER_H_
