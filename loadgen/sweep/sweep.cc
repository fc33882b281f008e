#include "loadgen/sweep/sweep.h"

#include <signal.h>
#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/stop_outcome.h"
#include "common/procfs/service_memory.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::rsslab::v1::Scenario;

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(s, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    out.emplace_back(p);
  }
  return out;
}

// A peer's message (the agent's, gRPC's) as one printable line: its first
// line, escaped (common/untrusted_text.h).
std::string FirstLine(absl::string_view s) { return Echo(s.substr(0, s.find('\n')), 1024); }

// How one attempt at a cell went.
struct AttemptResult {
  bool ok = false;
  bool host_lost = false;   // the host went away: it takes no more cells
  bool host_fault = false;  // the host, not the setup, failed the cell
  bool interrupted = false;
  std::string host_error;   // why the host is lost
  double seconds = 0;
  absl::Status log_error;   // events.jsonl could not be written
};

void NoteServerHost(const rsslab::v1::ServerProcess& server, rsslab::v1::HostInfo* h) {
  h->set_hostname(server.host_name());
  h->set_kernel(server.host_kernel());
  h->set_cpu_model(server.host_cpu_model());
  h->set_cpus(server.host_cpus());
  h->set_mem_total_bytes(server.host_mem_total_bytes());
  h->set_server_cpus(server.cpus_allowed());
}

// The user's pre-fork program (--command with --control=all:NAME): its
// Control is every worker it forked, each checked to run under the cell's
// profile as the launch verified the master; an HTTP target (--target=
// http://...) is aimed at the cell's port.
void PreforkAndHttp(const Runner::Options& given, const rsslab::v1::ServerProcess& server,
                    Runner::Options* ro) {
  if (!server.command().empty() && absl::StartsWith(given.control, "all:")) {
    ro->control = given.control;
    ro->outside_snapshot = nullptr;
    ro->control_root_pid = server.pid();
    std::map<std::string, std::string> env;
    for (const auto& e : server.verified_env()) env[e.name()] = e.value();
    const std::string library = server.mapped_library();
    ro->check_workers = [library, env, pid = server.pid()](const std::vector<int>& pids) {
      for (int w : pids) {
        if (absl::Status s = procfs::SameAllocatorSetup(w, library, env); !s.ok()) {
          return absl::FailedPreconditionError(
              absl::StrCat("program pid ", pid, ": ", s.message()));
        }
      }
      return absl::OkStatus();
    };
  }
  if (given.http != nullptr) {
    const std::string& a = server.data_address();
    const size_t colon = a.rfind(':');
    int port = 0;
    if (colon != std::string::npos && absl::SimpleAtoi(a.substr(colon + 1), &port)) {
      ro->http = std::make_shared<const http::Target>(given.http->WithBase(a.substr(0, colon), port));
    }
  }
}

// How the attempt went, from the steps' status and how the program ended:
// after Stop, SIGTERM's death or a declared exit code is a clean stop
// (agent/stop_outcome.h); a program that ended before Stop died, and the
// cell says after how many steps (their records are already in the log).
void JudgeAttempt(const absl::Status& run_status,
                  const absl::StatusOr<rsslab::v1::ServerProcess>& stopped, bool lost,
                  const SweepOptions& options, rsslab::v1::CellResult* cr, AttemptResult* res) {
  const auto& fin = cr->server();
  launch::StopVerdict verdict;
  if (stopped.ok()) {
    verdict = launch::JudgeStop({fin.ended_before_stop(), fin.exit_code(), fin.term_signal()},
                                options.ok_exit_codes);
  }
  const bool clean_exit = stopped.ok() && verdict.ending == launch::Ending::kNormalStop;
  const bool died = stopped.ok() && verdict.ending == launch::Ending::kDiedBeforeStop;
  if (run_status.ok() && clean_exit) {
    cr->set_ok(true);
    cr->set_failed_at("ok");
    res->ok = true;
    return;
  }
  cr->set_ok(false);
  cr->set_died_before_stop(died);
  std::vector<std::string> why;
  if (!stopped.ok()) {
    why.push_back(std::string(stopped.status().message()));
  } else if (died) {
    why.push_back(absl::StrFormat("died before stop after %d of %d steps (server %s)",
                                  cr->steps_done(), cr->steps_total(), fin.exit()));
  } else if (!clean_exit) {
    why.push_back(absl::StrCat("server ", fin.exit(), ": ", verdict.why));
  }
  if (!run_status.ok()) why.push_back(std::string(run_status.message()));
  cr->set_failed_at(died ? "died" : !clean_exit ? "exit" : "steps");
  cr->set_error(absl::StrJoin(why, "; "));
  // SIGKILL mid-run from nobody here: the kernel (OOM) or the machine's
  // owner took the server. Stop's own SIGKILL comes after the steps.
  const bool killed_by_host = !run_status.ok() && !res->interrupted && stopped.ok() &&
                              fin.term_signal() == SIGKILL;
  res->host_lost = lost;
  res->host_fault = lost || killed_by_host;
  if (lost) res->host_error = FirstLine(stopped.status().message());
  cr->set_host_fault(res->host_fault);
}

// One attempt: launch on `host`, run the plan, stop, one cell_result.
AttemptResult RunAttempt(CellHost& host, const SweepCell& cell, int attempt,
                         const std::string& head, const SweepOptions& options,
                         const Scenario& scenario, const Plan& plan, EventLog* log,
                         const StopFlag* stop) {
  AttemptResult res;
  const absl::Time start = absl::Now();
  Event tag;
  tag.set_cell(cell.id);
  tag.set_profile(cell.profile);
  tag.set_threads(cell.threads);
  tag.set_repeat(cell.repeat);
  tag.set_cell_index(cell.index);
  tag.set_attempt(attempt);
  Event result = tag;
  auto* cr = result.mutable_cell_result();
  cr->set_start_unix_nanos(absl::ToUnixNanos(start));
  *cr->mutable_host() = host.Where();
  auto progress = [&](const std::string& text) {
    PrintProgressLine(options.runner.progress, absl::StrCat(head, ": ", text));
  };

  bool lost = false;
  absl::StatusOr<rsslab::v1::ServerProcess> launched = host.Launch(cell, scenario, &lost);
  if (!launched.ok()) {
    cr->set_ok(false);
    cr->set_failed_at("launch");
    cr->set_error(std::string(launched.status().message()));
    cr->set_host_fault(lost);
    cr->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
    progress(absl::StrCat("FAILED to launch: ", FirstLine(launched.status().message())));
    res.host_lost = res.host_fault = lost;
    if (lost) res.host_error = FirstLine(launched.status().message());
    res.log_error = log->Append(result);
    res.seconds = absl::ToDoubleSeconds(absl::Now() - start);
    return res;
  }
  const auto& server = *launched;
  // An agent's server: the agent says where it runs.
  if (!server.host_name().empty()) NoteServerHost(server, cr->mutable_host());
  progress(absl::StrFormat("server %s pid %d (%s) data=%s control=%s", server.id(), server.pid(),
                           server.mapped_library().empty() ? "glibc" : server.mapped_library(),
                           server.data_address(), server.control_address()));

  Runner::Options ro = options.runner;
  ro.target = server.data_address();
  ro.control = server.control_address();
  if (ro.control.empty()) {
    // The user's program without a Control service: memory from outside.
    ro.outside_snapshot = [&host, server] { return host.OutsideSnapshot(server); };
  }
  PreforkAndHttp(options.runner, server, &ro);
  ro.tag = tag;
  ro.line_prefix = absl::StrCat(cell.id, " ");
  absl::Status run_status;
  int steps_done = 0;
  {
    Runner runner(ro, log, stop, /*summary=*/nullptr);
    run_status = runner.Run(plan);
    steps_done = runner.steps_done();
  }
  lost = false;
  absl::StatusOr<rsslab::v1::ServerProcess> stopped = host.Stop(server, options.stop_grace_ms, &lost);
  *cr->mutable_server() = stopped.ok() ? *stopped : server;
  cr->set_steps_done(steps_done);
  cr->set_steps_total(static_cast<int>(plan.steps.size()));
  cr->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  res.interrupted = absl::IsCancelled(run_status);
  JudgeAttempt(run_status, stopped, lost, options, cr, &res);
  res.log_error = log->Append(result);
  const auto& fin = cr->server();
  progress(absl::StrFormat("%s (server %s)%s", cr->ok() ? "ok" : "FAILED",
                           fin.exit().empty() ? "stopped" : fin.exit(),
                           cr->ok() ? "" : absl::StrCat(": ", FirstLine(cr->error()))));
  res.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return res;
}

// A cell waiting for a host.
struct Item {
  const SweepCell* cell = nullptr;
  int attempt = 1;
  std::set<int> avoid;  // hosts that failed it
};

class Scheduler {
 public:
  Scheduler(SweepOptions& o, const Scenario& scenario, const Plan& plan, EventLog* log,
            const StopFlag* stop, int total)
      : o_(o), scenario_(scenario), plan_(plan), log_(log), stop_(stop), total_(total),
        lost_(o.hosts.size(), false) {}

  void Add(const SweepCell* c) {
    absl::MutexLock l(&mu_);
    queue_.push_back(Item{c});
  }

  SweepOutcome Run() {
    std::vector<std::thread> workers;
    for (size_t i = 0; i < o_.hosts.size(); ++i) workers.emplace_back([this, i] { Work(i); });
    for (std::thread& t : workers) t.join();
    absl::MutexLock l(&mu_);
    for (const Item& it : queue_) out_.not_run.push_back(it.cell->id);
    out_.interrupted = out_.interrupted || (stop_ != nullptr && stop_->stopped());
    return out_;
  }
  absl::Status log_error() {
    absl::MutexLock l(&mu_);
    return log_error_;
  }

 private:
  bool Eligible(const Item& it, int host) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (it.avoid.count(host) == 0) return true;
    // Every host still up failed it already: better here than nowhere.
    for (size_t h = 0; h < lost_.size(); ++h) {
      if (!lost_[h] && it.avoid.count(static_cast<int>(h)) == 0) return false;
    }
    return true;
  }

  void Work(size_t host_index) {
    const int me = static_cast<int>(host_index);
    CellHost& host = *o_.hosts[host_index];
    while (true) {
      Item item;
      int seq = 0;
      {
        absl::MutexLock l(&mu_);
        while (true) {
          if ((stop_ != nullptr && stop_->stopped()) || !log_error_.ok()) return;
          auto it = std::find_if(queue_.begin(), queue_.end(),
                                 [&](const Item& i) { return Eligible(i, me); });
          if (it != queue_.end()) {
            item = *it;
            queue_.erase(it);
            break;
          }
          if (queue_.empty() && running_ == 0) return;
          // A running cell may come back (its host lost it); the timeout
          // notices an interrupt.
          mu_.AwaitWithTimeout(absl::Condition(&changed_), absl::Milliseconds(200));
          changed_ = false;
        }
        ++running_;
        seq = ++started_;
      }
      const std::string head = absl::StrFormat(
          "sweep [%d/%d] %s%s%s", seq, total_, item.cell->id,
          item.attempt > 1 ? absl::StrCat(" attempt ", item.attempt) : "",
          o_.hosts.size() > 1 ? absl::StrCat(" on ", host.name()) : "");
      AttemptResult r =
          RunAttempt(host, *item.cell, item.attempt, head, o_, scenario_, plan_, log_, stop_);
      absl::MutexLock l(&mu_);
      --running_;
      changed_ = true;
      out_.busy_seconds += r.seconds;
      if (!r.log_error.ok() && log_error_.ok()) log_error_ = r.log_error;
      if (r.interrupted) out_.interrupted = true;
      if (r.host_lost) {
        lost_[host_index] = true;
        out_.lost_hosts.push_back(absl::StrCat(host.name(), " (", r.host_error, ")"));
      }
      if (r.host_fault && !r.interrupted && item.attempt < o_.max_attempts) {
        ++out_.requeued;
        item.avoid.insert(me);
        ++item.attempt;
        PrintProgressLine(o_.runner.progress,
                          absl::StrFormat("sweep: %s lost to %s; queued again (attempt %d of %d)",
                                          item.cell->id, host.name(), item.attempt,
                                          o_.max_attempts));
        queue_.push_front(std::move(item));
      } else {
        ++out_.cells;
        if (!r.ok) ++out_.failed;
      }
      if (r.host_lost) return;
    }
  }

  SweepOptions& o_;
  const Scenario& scenario_;
  const Plan& plan_;
  EventLog* log_;
  const StopFlag* stop_;
  const int total_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  bool changed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> lost_ ABSL_GUARDED_BY(mu_);
  SweepOutcome out_ ABSL_GUARDED_BY(mu_);
  absl::Status log_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status ApplySweepOverrides(Scenario* scenario, const std::string& profiles,
                                 const std::string& threads, int repeats) {
  auto* sw = scenario->mutable_sweep();
  if (!profiles.empty()) {
    sw->clear_profiles();
    for (const std::string& p : SplitList(profiles)) sw->add_profiles(p);
  }
  if (!threads.empty()) {
    sw->clear_threads();
    for (const std::string& t : SplitList(threads)) {
      int n = 0;
      if (!absl::SimpleAtoi(t, &n) || n < 1 || n > 1024) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--threads_list: \"%s\" is not a thread count in 1..1024", t));
      }
      sw->add_threads(n);
    }
  }
  if (repeats < 0 || repeats > 1000) {
    return absl::InvalidArgumentError("--repeats must be in 1..1000");
  }
  if (repeats > 0) sw->set_repeats(repeats);
  if (sw->profiles_size() == 0 || sw->threads_size() == 0) {
    return absl::InvalidArgumentError(
        "the sweep needs at least one profile and one thread count");
  }
  if (CountCells(*sw) < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the matrix has more than %d cells (profiles x threads x repeats)", kMaxCells));
  }
  return absl::OkStatus();
}

absl::StatusOr<SweepOutcome> RunSweep(SweepOptions& options, const Scenario& scenario,
                                      const Plan& plan, EventLog* log, const StopFlag* stop) {
  if (options.hosts.empty()) return absl::InvalidArgumentError("a sweep needs a host");
  const std::vector<SweepCell> all = ExpandCells(scenario.sweep());
  std::vector<int> pick = options.cells;
  if (pick.empty()) {
    for (const SweepCell& c : all) pick.push_back(c.index);
  }
  int skipped = 0;
  std::vector<const SweepCell*> todo;
  for (int i : pick) {
    if (i < 0 || i >= static_cast<int>(all.size())) continue;  // checked by the caller
    if (options.done_cells.count(all[i].id) != 0) {
      ++skipped;
      continue;
    }
    todo.push_back(&all[i]);
  }
  Scheduler sched(options, scenario, plan, log, stop, static_cast<int>(todo.size()));
  for (const SweepCell* c : todo) sched.Add(c);
  SweepOutcome out = sched.Run();
  out.skipped = skipped;
  if (absl::Status s = sched.log_error(); !s.ok()) return s;
  if (!out.not_run.empty() && !out.interrupted) {
    return absl::UnavailableError(absl::StrFormat(
        "every host was lost (%s); %d cell(s) not run: %s", absl::StrJoin(out.lost_hosts, "; "),
        out.not_run.size(), absl::StrJoin(out.not_run, ", ")));
  }
  return out;
}

}  // namespace rsslab
