#include "agent/agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/agent_state.h"
#include "agent/exit_text.h"
#include "agent/profiles.h"
#include "agent/spawn.h"
#include "agent/stop_outcome.h"
#include "common/handler_params.h"
#include "common/host_info.h"
#include "common/listen.h"
#include "common/procfs/outside_snapshot.h"
#include "common/procfs/procfs.h"
#include "common/untrusted_text.h"
#include "common/grpc_status.h"
#include "common/ready_line.h"
#include "common/server_flags.h"
#include "common/shipped.h"

namespace rsslab {
namespace {

using rsslab::v1::LaunchRequest;
using rsslab::v1::Profile;

int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

// Where the server runs, for the sweep's records. Read per launch: cheap
// (uname, two /proc files), and a machine's CPUs can change.
void SetHost(v1::ServerProcess* info) {
  const HostFacts h = CurrentHost();
  info->set_host_name(h.hostname);
  info->set_host_kernel(h.kernel);
  info->set_host_cpu_model(h.cpu_model);
  info->set_host_cpus(h.cpus);
  info->set_host_mem_total_bytes(h.mem_total_bytes);
  info->set_cpus_allowed(FormatCpuList(AllowedCpus()));
}

constexpr char kUnknownExit[] = "ended (adopted from an earlier agent: exit status unknown)";

// A request naming an --allow_command program: its path, the operator's
// argument template filled with the agent's own numbers, its ready line, and
// /proc-only verification (it has no Control service to ask).
absl::Status CommandArgs(const LaunchRequest& req, const AgentService::Options& options,
                         launch::LaunchOptions* lo, commands::Values* ports) {
  absl::StatusOr<const commands::Command*> found =
      commands::Lookup(options.commands, req.command(), "this agent");
  if (!found.ok()) return found.status();
  const commands::Command& cmd = **found;
  if (!req.handler().empty() || !req.server_flags().empty()) {
    return absl::InvalidArgumentError(
        "a command takes neither handler nor server_flags: its arguments come from the agent's "
        "--allow_command_args template only");
  }
  return commands::Configure(cmd, options.server_host, req.threads() == 0 ? 4 : req.threads(),
                             lo, ports);
}

}  // namespace

AgentService::AgentService(Options options) : options_(std::move(options)) {
  reaper_ = std::thread([this] { ReaperLoop(); });
  watcher_ = std::thread([this] { WatchAdopted(); });
}

AgentService::~AgentService() {
  StopAll(absl::Seconds(5));
  {
    absl::MutexLock l(&mu_);
    shutting_down_ = true;
    stop_watcher_ = true;
  }
  reaper_.join();
  watcher_.join();
}

std::string AgentService::AllowedFlagsHelp() { return ServerFlagsHelp(FlagSource::kRequest); }

absl::Status AgentService::BuildArgs(const LaunchRequest& req, const Profile** profile,
                                     launch::LaunchOptions* lo, commands::Values* ports) {
  if (req.profile().empty()) return absl::InvalidArgumentError("profile is required");
  if (!profiles::IsPlainName(req.profile())) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile '", Echo(req.profile(), 64), "' must be a profile name, not a path"));
  }
  *profile = profiles::FindProfile(options_.profiles, req.profile());
  if (*profile == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown profile '", Echo(req.profile(), 64), "' (known: ",
                                            profiles::ProfileNames(options_.profiles), ")"));
  }
  if (!(*profile)->unavailable().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "profile '", req.profile(), "' is unavailable on this machine: ", (*profile)->unavailable()));
  }
  if (req.threads() < 0 || req.threads() > options_.max_threads) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be in [1, ", options_.max_threads,
                                                   "] (0: the server's default of 4); got ",
                                                   req.threads()));
  }
  if (req.label().size() > 200 ||
      std::any_of(req.label().begin(), req.label().end(),
                  [](char c) { return absl::ascii_iscntrl(c); })) {
    return absl::InvalidArgumentError("label: at most 200 characters, no control characters");
  }
  if (!req.command().empty()) return CommandArgs(req, options_, lo, ports);
  absl::StatusOr<std::string> handler = launch::FindHandler(req.handler(), options_.handler_dirs);
  if (!handler.ok()) return handler.status();
  const int threads = req.threads() == 0 ? 4 : req.threads();
  lo->fixed_args = {"--listen=" + JoinHostPort(options_.server_host, 0),
                    "--control_listen=" + JoinHostPort(options_.server_host, 0),
                    absl::StrCat("--threads=", threads), "--handler=" + *handler};
  for (const std::string& a : options_.server_security_args) lo->fixed_args.push_back(a);
  // Sorted: a map's order is not the request's, and the log and state file
  // should not change from one launch of the same request to the next.
  std::map<std::string, std::string> flags(req.server_flags().begin(), req.server_flags().end());
  lo->flags.assign(flags.begin(), flags.end());
  lo->flag_check = launch::LaunchOptions::FlagCheck::kRequest;
  // Checked here as well as in StartVerifiedServer: a bad flag is refused
  // before an id and a log are taken.
  for (const auto& [flag, value] : lo->flags) {
    if (absl::Status s = CheckServerFlag(flag, value, FlagSource::kRequest); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status AgentService::CheckCapacityLocked() {
  if (shutting_down_) return absl::UnavailableError("agent is shutting down");
  std::vector<std::string> running;
  for (const auto& [id, r] : runs_) {
    if (!r->exited) running.push_back(id);
  }
  if (static_cast<int>(running.size()) >= options_.max_servers) {
    return absl::ResourceExhaustedError(
        absl::StrCat("max_servers=", options_.max_servers, " reached: ", running.size(),
                     " servers running (", absl::StrJoin(running, ", "), "); stop one first"));
  }
  return absl::OkStatus();
}

// The agent's side of a launch: it forks under mu_ so the reaper (one
// waitpid(-1) for every child) cannot see the pid before it is in by_pid_,
// and records the run (state file included) before it is ready, so an
// agent that dies now leaves a record and the next one stops the
// half-launched server.
class AgentService::RunChild : public launch::Child {
 public:
  RunChild(AgentService* agent, std::shared_ptr<Run> run) : agent_(agent), run_(std::move(run)) {}

  absl::StatusOr<pid_t> Spawn(const launch::SpawnOptions& so) override {
    absl::MutexLock l(&agent_->mu_);
    if (absl::Status s = agent_->CheckCapacityLocked(); !s.ok()) return s;
    // The child counts from before fork: a child whose exec fails still has
    // to be reaped (the reaper drops unknown pids).
    ++agent_->live_children_;
    absl::StatusOr<pid_t> pid = launch::Spawn(so);
    if (!pid.ok()) {
      if (pid.status().code() != absl::StatusCode::kFailedPrecondition) --agent_->live_children_;
      return pid;
    }
    run_->pid = *pid;
    run_->args = so.args;
    // Our unreaped child: this pid cannot have been reused yet.
    absl::StatusOr<agent_state::ProcStat> st = agent_state::ReadProcStat(*pid);
    run_->start_ticks = st.ok() ? st->start_ticks : 0;
    run_->info.set_pid(*pid);
    run_->info.set_running(true);
    run_->info.set_started_unix_nanos(NowNanos());
    agent_->runs_[run_->info.id()] = run_;
    agent_->by_pid_[*pid] = run_;
    agent_->ForgetOldRunsLocked();
    agent_->SaveStateLocked();
    return pid;
  }
  absl::StatusOr<pid_t> SpawnDetached(const launch::SpawnOptions& so) override {
    absl::MutexLock l(&agent_->mu_);
    // The middle process exits at once; the reaper collects it (an unknown
    // pid), so it counts from before fork like any child.
    ++agent_->live_children_;
    absl::StatusOr<pid_t> pid = launch::Spawn(so);
    if (!pid.ok() && pid.status().code() != absl::StatusCode::kFailedPrecondition) {
      --agent_->live_children_;
    }
    return pid;
  }
  bool AwaitExit(absl::Duration timeout) override { return agent_->AwaitExit(run_, timeout); }
  void Signal(int sig) override {
    absl::MutexLock l(&agent_->mu_);
    agent_->SignalLocked(*run_, sig);
  }
  std::string ExitDescription() override {
    absl::MutexLock l(&agent_->mu_);
    return run_->info.exit();
  }

 private:
  AgentService* const agent_;
  const std::shared_ptr<Run> run_;
};

grpc::Status AgentService::Launch(grpc::ServerContext* ctx, const LaunchRequest* req,
                                  rsslab::v1::LaunchResponse* resp) {
  if (grpc::Status a = Authorize(*ctx); !a.ok()) return a;
  const Profile* profile = nullptr;
  launch::LaunchOptions lo;
  commands::Values ports;
  if (absl::Status valid = BuildArgs(*req, &profile, &lo, &ports); !valid.ok()) {
    return ToGrpc(valid);
  }
  const bool command = !req->command().empty();
  const int threads = req->threads() == 0 ? 4 : req->threads();
  auto run = std::make_shared<Run>();
  {
    absl::MutexLock l(&mu_);
    if (absl::Status s = CheckCapacityLocked(); !s.ok()) return ToGrpc(s);
    v1::ServerProcess& info = run->info;
    run->seq = next_id_;
    info.set_id(absl::StrFormat("s%04llu-%s-t%d", static_cast<unsigned long long>(next_id_++),
                                profile->name(), threads));
    info.set_profile(profile->name());
    info.set_threads(threads);
    if (!command) {
      info.set_handler(req->handler().empty() ? std::string(kDefaultHandlerName) : req->handler());
    }
    info.set_command(req->command());
    info.set_log_path(absl::StrCat(options_.log_dir, "/", info.id(), ".log"));
    info.set_label(req->label());
  }
  const std::string id = run->info.id();
  if (!command) lo.program = options_.server_binary;  // a command's: set by BuildArgs
  run->binary = lo.program;
  lo.profile = profile;
  lo.name = command ? absl::StrCat("command ", req->command(), " ", id) : "server " + id;
  for (const auto& kv : options_.extra_env) lo.base_env[kv.first] = kv.second;
  // stdout and stderr to the log, through a log writer of its own when
  // capped: the server outlives the agent if the agent crashes, and then
  // has no pipe to break.
  lo.output = launch::Output::kLogFile;
  lo.log_path = run->info.log_path();
  lo.log_max_bytes = options_.log_max_bytes;
  lo.log_writer_binary = options_.log_writer_binary;
  lo.log_header = LogHeader(id, lo, *profile);
  lo.ready_timeout = options_.ready_timeout;
  lo.security = options_.security;
  lo.child = std::make_shared<RunChild>(this, run);
  absl::StatusOr<launch::Started> started = launch::StartVerifiedServer(lo);
  std::string data, control;  // a command's
  if (started.ok() && command) {
    // Stops it on a refused address (StopStarted takes mu_ itself).
    absl::Status a = commands::AddressesOrStop(options_.commands.at(req->command()), ports,
                                               *started, &data, &control);
    if (!a.ok()) return ToGrpc(a);
  }
  absl::MutexLock l(&mu_);
  if (!started.ok()) {
    if (run->pid > 0) run->info.set_log_tail(launch::LogTail(run->info.log_path()));
    return ToGrpc(started.status());
  }
  run->log_writer = started->log_writer;
  const ReadyLine& ready = started->verified.ready;
  const profiles::Verification& v = started->verified.verification;
  v1::ServerProcess& info = run->info;
  if (command) {
    // The command's ports are the agent's choice (its template passes
    // them), or its Control address is in its ready line.
    info.set_data_address(data);
    info.set_control_address(control);
  } else {
    info.set_data_address(ready.data_address);
    info.set_control_address(ready.control_address);
  }
  info.set_mapped_library(v.mapped_library);
  SetHost(&info);
  for (const auto& [name, value] : v.env) {
    v1::EnvVar* e = info.add_verified_env();
    e->set_name(name);
    e->set_value(value);
  }
  SaveStateLocked();
  *resp->mutable_server() = info;
  return grpc::Status::OK;
}

// What was run, at the top of its own log, for whoever reads it later.
std::string AgentService::LogHeader(const std::string& id, const launch::LaunchOptions& lo,
                                    const Profile& profile) const {
  std::vector<std::string> shown_env;
  for (const auto& kv : procfs::AllocatorEnv(launch::LaunchEnv(lo))) {
    shown_env.push_back(kv.first + "=" + kv.second);
  }
  return absl::StrCat("# rsslab_agent ", id, ": ", lo.program, " ",
                      commands::JoinQuoted(launch::LaunchArgs(lo)), "\n# profile ", profile.name(),
                      " env: ", absl::StrJoin(shown_env, " "), "\n");
}

bool AgentService::AwaitExit(const std::shared_ptr<Run>& run, absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&run->exited), timeout);
}

void AgentService::Terminate(const std::shared_ptr<Run>& run, absl::Duration grace) {
  {
    // Signalled under mu_: while exited is false the pid is ours (alive or a
    // zombie), never a recycled one.
    absl::MutexLock l(&mu_);
    if (run->exited) return;
    SignalLocked(*run, SIGTERM);
  }
  if (AwaitExit(run, grace)) return;
  {
    absl::MutexLock l(&mu_);
    if (run->exited) return;
    SignalLocked(*run, SIGKILL);
  }
  AwaitExit(run, absl::Seconds(30));
}

grpc::Status AgentService::Authorize(const grpc::ServerContext& ctx) const {
  return options_.security ? options_.security->Authorize(ctx) : grpc::Status::OK;
}

grpc::Status AgentService::Stop(grpc::ServerContext* ctx, const rsslab::v1::StopRequest* req,
                                rsslab::v1::StopResponse* resp) {
  if (grpc::Status a = Authorize(*ctx); !a.ok()) return a;
  if (req->grace_ms() < 0 || req->grace_ms() > 600000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "grace_ms must be in [0, 600000]");
  }
  std::shared_ptr<Run> run;
  {
    absl::MutexLock l(&mu_);
    auto it = runs_.find(req->id());
    if (it == runs_.end()) {
      // The running ones only, and at most a few: a list of every id ever
      // launched once outgrew gRPC's metadata limit, and an unknown id was
      // then answered RESOURCE_EXHAUSTED instead of NOT_FOUND.
      std::vector<std::string> ids;
      int more = 0;
      for (const auto& kv : runs_) {
        if (kv.second->exited) continue;
        if (ids.size() < 16) {
          ids.push_back(kv.first);
        } else {
          ++more;
        }
      }
      std::string known = ids.empty() ? "none running" : absl::StrJoin(ids, ", ");
      if (more > 0) absl::StrAppend(&known, " and ", more, " more");
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no server '", Echo(req->id(), 64), "' (running: ", known,
                                       "; List shows every server)"));
    }
    run = it->second;
    if (run->stop_started) {
      // Serialized per server: a second SIGTERM would make the server exit
      // at once, cutting the calls the first one lets drain. This caller
      // waits for the first Stop and gets its answer.
      mu_.Await(absl::Condition(&run->stop_finished));
      *resp = run->stop_response;
      return run->stop_status;
    }
    run->stop_started = true;
    // Already reaped, or ending before the reaper got to it (a sweep may
    // have seen it die, and come to stop it, first): it ended on its own.
    if (run->exited || launch::EndedOrEnding(run->pid)) run->info.set_ended_before_stop(true);
  }
  Terminate(run, absl::Milliseconds(req->grace_ms() == 0 ? 5000 : req->grace_ms()));
  std::shared_ptr<launch::LogWriterDone> log_writer;
  {
    absl::MutexLock l(&mu_);
    if (run->exited) log_writer = run->log_writer;
  }
  // The log tail below is the server's last words: all of them.
  if (log_writer != nullptr) log_writer->Await(launch::kLogDrainTimeout);
  absl::MutexLock l(&mu_);
  if (!run->exited) {
    run->stop_status = grpc::Status(grpc::StatusCode::INTERNAL,
                                    absl::StrCat("server ", run->info.id(), " (pid ", run->pid,
                                                 ") did not exit after SIGKILL"));
  } else {
    run->info.set_log_tail(launch::LogTail(run->info.log_path()));
    *run->stop_response.mutable_server() = run->info;
    run->stop_status = grpc::Status::OK;
  }
  run->stop_finished = true;
  *resp = run->stop_response;
  ForgetOldRunsLocked();
  return run->stop_status;
}

void AgentService::ForgetOldRunsLocked() {
  // Ended runs stay listed (how they ended) but not for ever: the oldest
  // beyond kKeepEnded are dropped, so memory and List stay bounded however
  // many launches an agent serves. Ids keep counting (64-bit), never reused.
  std::vector<std::pair<uint64_t, std::string>> ended;
  for (const auto& [id, r] : runs_) {
    if (r->exited && (!r->stop_started || r->stop_finished)) ended.emplace_back(r->seq, id);
  }
  if (ended.size() <= kKeepEnded) return;
  std::sort(ended.begin(), ended.end());
  for (size_t i = 0; i + kKeepEnded < ended.size(); ++i) runs_.erase(ended[i].second);
}

grpc::Status AgentService::List(grpc::ServerContext* ctx, const rsslab::v1::ListRequest*,
                                rsslab::v1::ListResponse* resp) {
  if (grpc::Status a = Authorize(*ctx); !a.ok()) return a;
  absl::MutexLock l(&mu_);
  for (const auto& [id, run] : runs_) {
    v1::ServerProcess* s = resp->add_servers();
    *s = run->info;
    // A crash after launch shows up here with how it died and why.
    if (run->exited && s->log_tail().empty()) s->set_log_tail(launch::LogTail(s->log_path()));
  }
  return grpc::Status::OK;
}

grpc::Status AgentService::ListProfiles(grpc::ServerContext* ctx, const rsslab::v1::ListProfilesRequest*,
                                        rsslab::v1::ListProfilesResponse* resp) {
  if (grpc::Status a = Authorize(*ctx); !a.ok()) return a;
  for (const Profile& p : options_.profiles.profile()) {
    resp->add_names(p.name());
    resp->add_descriptions(p.description());
    resp->add_unavailable(p.unavailable());
  }
  return grpc::Status::OK;
}

grpc::Status AgentService::ProcSnapshot(grpc::ServerContext* ctx,
                                        const rsslab::v1::ProcSnapshotRequest* req,
                                        rsslab::v1::Snapshot* resp) {
  if (grpc::Status a = Authorize(*ctx); !a.ok()) return a;
  absl::MutexLock l(&mu_);
  auto it = runs_.find(req->id());
  if (it == runs_.end() || it->second->exited) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no running server '", Echo(req->id(), 100), "'"));
  }
  // Under mu_: until it is reaped the pid is this run's (alive or a zombie).
  absl::StatusOr<v1::Snapshot> s = procfs::OutsideSnapshot(it->second->pid);
  if (!s.ok()) return ToGrpc(s.status());
  *resp = *std::move(s);
  return grpc::Status::OK;
}

void AgentService::StopAll(absl::Duration grace) {
  std::vector<std::shared_ptr<Run>> running;
  {
    absl::MutexLock l(&mu_);
    shutting_down_ = true;  // no launches from now on
    for (const auto& kv : runs_) {
      if (!kv.second->exited) {
        // A Stop in progress already sent SIGTERM: a second one would end
        // the drain at once.
        if (!kv.second->stop_started) SignalLocked(*kv.second, SIGTERM);
        running.push_back(kv.second);
      }
    }
  }
  const absl::Time deadline = absl::Now() + grace;
  for (const auto& run : running) {
    if (AwaitExit(run, std::max(deadline - absl::Now(), absl::ZeroDuration()))) continue;
    Terminate(run, absl::ZeroDuration());
  }
}

void AgentService::ReaperLoop() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      auto work = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return live_children_ > 0 || shutting_down_;
      };
      mu_.Await(absl::Condition(&work));
      if (live_children_ == 0 && shutting_down_) return;
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      absl::MutexLock l(&mu_);
      if (errno == ECHILD) live_children_ = 0;  // our count was off; nothing to wait for
      continue;
    }
    absl::MutexLock l(&mu_);
    --live_children_;
    auto it = by_pid_.find(pid);
    if (it == by_pid_.end()) continue;  // a child whose exec failed
    Run& run = *it->second;
    run.exited = true;
    run.info.set_running(false);
    run.info.set_exit(launch::DescribeExit(status));
    run.info.set_exit_code(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    run.info.set_term_signal(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    run.info.set_ended_unix_nanos(NowNanos());
    by_pid_.erase(it);
    SaveStateLocked();
  }
}

void AgentService::SignalLocked(const Run& run, int sig) {
  if (run.exited) return;
  if (run.adopted) {
    // Not our child: between our last look and now it may have died and its
    // pid been reused. The start time tells.
    absl::StatusOr<agent_state::ProcStat> st = agent_state::ReadProcStat(run.pid);
    if (!st.ok() || st->start_ticks != run.start_ticks) return;
  }
  kill(run.pid, sig);
}

void AgentService::MarkAdoptedEnded(Run* run, const std::string& how) {
  run->exited = true;
  run->info.set_running(false);
  run->info.set_exit(how);
  run->info.set_exit_code(-1);
  run->info.set_ended_unix_nanos(NowNanos());
  fprintf(stderr, "rsslab_agent: adopted server %s (pid %d) %s\n", run->info.id().c_str(),
          run->pid, how.c_str());
  SaveStateLocked();
}

void AgentService::WatchAdopted() {
  absl::MutexLock l(&mu_);
  while (!stop_watcher_) {
    for (auto& [id, run] : runs_) {
      if (!run->adopted || run->exited) continue;
      absl::StatusOr<agent_state::ProcStat> st = agent_state::ReadProcStat(run->pid);
      // Gone, a zombie (its new parent has not reaped it yet), or the pid
      // reused: it has ended either way.
      if (!st.ok() || st->start_ticks != run->start_ticks || st->state == 'Z') {
        MarkAdoptedEnded(run.get(), kUnknownExit);
      }
    }
    // Often enough for Stop's SIGTERM-then-wait to return promptly.
    mu_.AwaitWithTimeout(absl::Condition(&stop_watcher_), absl::Milliseconds(100));
  }
}

void AgentService::SaveStateLocked() {
  if (options_.state_file.empty()) return;
  v1::AgentState state;
  state.set_agent_pid(getpid());
  state.set_written_unix_nanos(NowNanos());
  // The state file's field is 32-bit; ids past it still never repeat
  // within this agent (next_id_ is 64-bit), and the adopted ids are parsed.
  state.set_next_id(static_cast<int32_t>(std::min<uint64_t>(next_id_, INT32_MAX)));
  for (const auto& [id, run] : runs_) {
    if (run->exited) continue;
    v1::AgentStateServer* s = state.add_servers();
    *s->mutable_server() = run->info;
    s->mutable_server()->clear_log_tail();
    s->mutable_server()->clear_adopted();
    s->set_start_ticks(run->start_ticks);
    s->set_server_binary(run->binary.empty() ? options_.server_binary : run->binary);
    for (const std::string& a : run->args) s->add_args(a);
  }
  absl::Status w = agent_state::Write(options_.state_file, state);
  if (!w.ok() && !state_error_logged_) {
    fprintf(stderr, "rsslab_agent: WARNING: %s; a restarted agent will not find its servers\n",
            std::string(w.message()).c_str());
  }
  state_error_logged_ = !w.ok();
}

void AgentService::AdoptFromState(std::vector<std::string>* log) {
  if (options_.state_file.empty()) return;
  absl::StatusOr<v1::AgentState> state = agent_state::Read(options_.state_file);
  absl::MutexLock l(&mu_);
  if (absl::IsNotFound(state.status())) {
    SaveStateLocked();
    return;
  }
  if (!state.ok()) {
    // Refusing to start would leave a service that restarts in a loop;
    // starting over the file would lose the evidence. Set it aside.
    const std::string aside = absl::StrCat(
        options_.state_file, ".corrupt-",
        absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()));
    const bool moved = rename(options_.state_file.c_str(), aside.c_str()) == 0;
    log->push_back(absl::StrCat(
        "WARNING: ", state.status().message(), "; ",
        moved ? absl::StrCat("moved to ", aside) : absl::StrCat("could not move it: ", strerror(errno)),
        "; servers it listed are not adopted (look for them with: pgrep -f ",
        options_.server_binary, ")"));
    SaveStateLocked();
    return;
  }
  if (state->next_id() > 0) next_id_ = std::max<uint64_t>(next_id_, state->next_id());
  for (const v1::AgentStateServer& rec : state->servers()) {
    const v1::ServerProcess& was = rec.server();
    // Ids are sNNNN-...: keep new ones clear of every recorded one (the
    // number may have more than 4 digits).
    uint64_t n = 0;
    const size_t dash = was.id().find('-');
    if (was.id().size() > 1 && dash != std::string::npos &&
        absl::SimpleAtoi(was.id().substr(1, dash - 1), &n)) {
      next_id_ = std::max(next_id_, n + 1);
    }
    if (runs_.count(was.id()) != 0) continue;  // a duplicate record
    auto run = std::make_shared<Run>();
    run->info = was;
    run->pid = was.pid();
    run->start_ticks = rec.start_ticks();
    run->args.assign(rec.args().begin(), rec.args().end());
    run->adopted = true;
    run->info.set_adopted(true);
    std::string why = agent_state::WhyNotAlive(rec, options_.server_binary);
    if (why.empty() && was.data_address().empty()) {
      // The earlier agent died during this launch: nobody was told its
      // addresses, so nobody is using it. Stop it rather than keep it.
      kill(run->pid, SIGKILL);
      why = absl::StrCat("the earlier agent died while launching it (pid ", run->pid,
                         " was never reported ready); killed it");
    }
    if (!why.empty()) {
      run->exited = true;
      run->info.set_running(false);
      run->info.set_lost(why);
      run->info.set_exit(absl::StrCat("lost: ", why));
      run->info.set_exit_code(-1);
      run->info.set_log_tail(launch::LogTail(was.log_path()));
      log->push_back(absl::StrCat("lost server ", was.id(), " (profile ", was.profile(),
                                  ", pid ", was.pid(), "): ", why, "; log ", was.log_path(),
                                  "; dropped from the state file"));
    } else {
      run->info.set_running(true);
      log->push_back(absl::StrCat("adopted server ", was.id(), " (profile ", was.profile(),
                                  ", pid ", was.pid(), ", data=", was.data_address(),
                                  " control=", was.control_address(), ") from ",
                                  options_.state_file));
    }
    runs_[was.id()] = run;
  }
  SaveStateLocked();
}

}  // namespace rsslab
