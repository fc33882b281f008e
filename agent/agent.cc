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
#include "agent/profiles.h"
#include "common/handler_params.h"
#include "common/host_info.h"
#include "common/listen.h"
#include "common/procfs/outside_snapshot.h"
#include "common/procfs/procfs.h"
#include "common/grpc_status.h"
#include "common/ready_line.h"
#include "common/shipped.h"

namespace rsslab {
namespace {

using rsslab::v1::LaunchRequest;
using rsslab::v1::Profile;

// The server flags a client may set, and what each accepts. Everything the
// agent decides itself (listen addresses, threads, handler) is not here.
struct FlagRule {
  const char* name;
  enum Kind { kInt, kChoice, kParams } kind;
  int64_t min = 0;
  int64_t max = 0;
  const char* choices = "";
};

const FlagRule kFlags[] = {
    {"cache_limit_mb", FlagRule::kInt, 0, 1 << 20},
    {"max_cache_limit_mb", FlagRule::kInt, 0, 1 << 20},
    {"thread_mode", FlagRule::kChoice, 0, 0, "fixed,churn"},
    {"churn_every", FlagRule::kInt, 1, 1000000000},
    {"churn_overlap_ms", FlagRule::kInt, 0, 3600000},
    {"stuck_after_ms", FlagRule::kInt, 1, 3600000},
    {"max_watch_streams", FlagRule::kInt, 1, 1024},
    {"shutdown_grace_ms", FlagRule::kInt, 0, 600000},
    {"handler_budget_ms", FlagRule::kInt, 0, 3600000},
    {"handler_params", FlagRule::kParams},
};

const FlagRule* FindFlag(absl::string_view name) {
  for (const FlagRule& f : kFlags) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::string FlagNames() {
  std::vector<std::string> names;
  for (const FlagRule& f : kFlags) names.push_back(f.name);
  return absl::StrJoin(names, ", ");
}

absl::Status CheckFlagValue(const FlagRule& f, absl::string_view v) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("server flag ", f.name, "='", v, "': ", why));
  };
  switch (f.kind) {
    case FlagRule::kInt: {
      int64_t n;
      if (!absl::SimpleAtoi(v, &n) || n < f.min || n > f.max) {
        return bad(absl::StrCat("want an integer in [", f.min, ", ", f.max, "]"));
      }
      return absl::OkStatus();
    }
    case FlagRule::kChoice:
      for (absl::string_view c : absl::StrSplit(f.choices, ',')) {
        if (v == c) return absl::OkStatus();
      }
      return bad(absl::StrCat("want one of ", f.choices));
    case FlagRule::kParams:
      if (v.size() > 4096) return bad("longer than 4096 characters");
    {
      absl::StatusOr<std::map<std::string, std::string>> params = ParseHandlerParams(v);
      if (!params.ok()) return bad("want key=value,key=value");
      for (const auto& [key, value] : *params) {
        for (char c : key) {
          if (!absl::ascii_isalnum(c) && c != '_') return bad("keys are [A-Za-z0-9_]+");
        }
        for (char c : value) {
          if (!absl::ascii_isprint(c)) return bad("values are printable ASCII");
        }
      }
      return absl::OkStatus();
    }
  }
  return bad("unknown rule");
}

bool IsHandlerName(absl::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

std::vector<std::string> HandlersIn(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const std::string& d : dirs) {
    DIR* dir = opendir(d.c_str());
    if (dir == nullptr) continue;
    while (dirent* e = readdir(dir)) {
      absl::string_view n(e->d_name);
      if (absl::ConsumeSuffix(&n, ".py") && IsHandlerName(n)) out.emplace_back(n);
    }
    closedir(dir);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

// Looks for the server's ready line in its log from *offset on (the start of
// a line), and moves *offset past the complete lines read. The server's
// stdout goes straight to its log file, not through a pipe to the agent: a
// pipe would break when the agent dies, and a server writing to it after
// that would get SIGPIPE.
bool FindReadyLine(const std::string& path, off_t* offset, std::string* line) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string text;
  char buf[8192];
  ssize_t n;
  // Bounded: the ready line comes right after start-up; a server that logs
  // megabytes before it is not ready anyway.
  while (text.size() < (4 << 20) &&
         (n = pread(fd, buf, sizeof(buf), *offset + static_cast<off_t>(text.size()))) > 0) {
    text.append(buf, n);
  }
  close(fd);
  size_t start = 0;
  while (true) {
    const size_t nl = text.find('\n', start);
    if (nl == std::string::npos) break;
    absl::string_view l(text.data() + start, nl - start);
    start = nl + 1;
    if (IsReadyLine(l)) {
      *line = std::string(l);
      *offset += static_cast<off_t>(start);
      return true;
    }
  }
  *offset += static_cast<off_t>(start);
  return false;
}

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

std::string AgentService::AllowedFlagsHelp() {
  std::vector<std::string> out;
  for (const FlagRule& f : kFlags) {
    switch (f.kind) {
      case FlagRule::kInt:
        out.push_back(absl::StrCat(f.name, " (", f.min, "..", f.max, ")"));
        break;
      case FlagRule::kChoice:
        out.push_back(absl::StrCat(f.name, " (", f.choices, ")"));
        break;
      case FlagRule::kParams:
        out.push_back(absl::StrCat(f.name, " (k=v,k=v)"));
        break;
    }
  }
  return absl::StrJoin(out, ", ");
}

absl::StatusOr<const Profile*> AgentService::RequestedProfile(const LaunchRequest& req) const {
  if (req.profile().empty()) return absl::InvalidArgumentError("profile is required");
  if (!profiles::IsPlainName(req.profile())) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile '", req.profile(), "' must be a profile name, not a path"));
  }
  const Profile* profile = profiles::FindProfile(options_.profiles, req.profile());
  if (profile == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown profile '", req.profile(), "' (known: ",
                                            profiles::ProfileNames(options_.profiles), ")"));
  }
  if (req.threads() < 0 || req.threads() > options_.max_threads) {
    return absl::InvalidArgumentError(absl::StrCat("threads must be in [1, ", options_.max_threads,
                                                   "] (0: the default of 4); got ", req.threads()));
  }
  if (req.label().size() > 200 ||
      std::any_of(req.label().begin(), req.label().end(),
                  [](char c) { return absl::ascii_iscntrl(c); })) {
    return absl::InvalidArgumentError("label: at most 200 characters, no control characters");
  }
  return profile;
}

absl::Status AgentService::BuildArgs(const LaunchRequest& req, const Profile** profile,
                                     std::vector<std::string>* args, std::string* handler) {
  absl::StatusOr<const Profile*> p = RequestedProfile(req);
  if (!p.ok()) return p.status();
  *profile = *p;
  std::string name = req.handler().empty() ? std::string(kDefaultHandlerName) : req.handler();
  if (!IsHandlerName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "handler '", name, "' must be a handler name such as web_worker ([A-Za-z0-9_]+), not a path"));
  }
  handler->clear();
  for (const std::string& d : options_.handler_dirs) {
    std::string p = absl::StrCat(d, "/", name, ".py");
    if (access(p.c_str(), R_OK) == 0) {
      *handler = p;
      break;
    }
  }
  if (handler->empty()) {
    return absl::NotFoundError(absl::StrCat("handler '", name, "' not found (available: ",
                                            absl::StrJoin(HandlersIn(options_.handler_dirs), ", "),
                                            ")"));
  }
  const int threads = req.threads() == 0 ? 4 : req.threads();
  args->clear();
  args->push_back("--listen=" + JoinHostPort(options_.server_host, 0));
  args->push_back("--control_listen=" + JoinHostPort(options_.server_host, 0));
  args->push_back(absl::StrCat("--threads=", threads));
  args->push_back("--handler=" + *handler);
  for (const std::string& a : options_.server_security_args) args->push_back(a);
  for (const auto& [flag, value] : req.server_flags()) {
    const FlagRule* rule = FindFlag(flag);
    if (rule == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server flag '", flag, "' is not allowed (allowed: ", FlagNames(),
          "; threads, handler and the listen addresses are LaunchRequest fields or chosen by "
          "the agent)"));
    }
    absl::Status s = CheckFlagValue(*rule, value);
    if (!s.ok()) return s;
    args->push_back(absl::StrCat("--", flag, "=", value));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<AgentService::Run>> AgentService::StartRun(
    const LaunchRequest& req, const Profile& profile, const std::string& binary,
    const std::vector<std::string>& args, const profiles::Env& env, off_t* ready_offset) {
  auto run = std::make_shared<Run>();
  absl::MutexLock l(&mu_);
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
  const int threads = req.threads() == 0 ? 4 : req.threads();
  const std::string id = absl::StrFormat("s%04d-%s-t%d", next_id_++, profile.name(), threads);
  const std::string log_path = absl::StrCat(options_.log_dir, "/", id, ".log");
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create log ", log_path, ": ", strerror(errno)));
  }
  // What was run, at the top of its own log, for whoever reads it later.
  std::vector<std::string> shown_env;
  for (const auto& kv : procfs::AllocatorEnv(env)) shown_env.push_back(kv.first + "=" + kv.second);
  std::string header = absl::StrCat("# rsslab_agent ", id, ": ", binary, " ",
                                    absl::StrJoin(args, " "), "\n# profile ", profile.name(),
                                    " env: ", absl::StrJoin(shown_env, " "), "\n");
  ssize_t ignored = write(log_fd, header.data(), header.size());
  (void)ignored;
  *ready_offset = static_cast<off_t>(header.size());
  launch::SpawnOptions so;
  so.binary = binary;
  so.args = args;
  so.env = profiles::EnvStrings(env);
  // stdout and stderr both to the log (one O_APPEND description): the
  // server outlives the agent if the agent crashes, and then has no pipe
  // to break. The ready line is read back from the log.
  so.stdout_fd = log_fd;
  so.stderr_fd = log_fd;
  // Forked under mu_, so the reaper cannot see this pid before it is in
  // by_pid_. The child counts from before fork: a child whose exec fails
  // still has to be reaped (the reaper drops unknown pids).
  ++live_children_;
  absl::StatusOr<pid_t> pid = launch::Spawn(so);
  close(log_fd);
  if (!pid.ok()) {
    if (pid.status().code() != absl::StatusCode::kFailedPrecondition) --live_children_;  // no child
    return pid.status();
  }
  run->pid = *pid;
  run->args = args;
  run->binary = binary;
  // Our unreaped child: this pid cannot have been reused yet.
  absl::StatusOr<agent_state::ProcStat> st = agent_state::ReadProcStat(*pid);
  run->start_ticks = st.ok() ? st->start_ticks : 0;
  v1::ServerProcess& info = run->info;
  info.set_id(id);
  info.set_pid(*pid);
  info.set_profile(profile.name());
  info.set_threads(threads);
  if (req.command().empty()) {
    info.set_handler(req.handler().empty() ? std::string(kDefaultHandlerName) : req.handler());
  }
  info.set_command(req.command());
  info.set_log_path(log_path);
  info.set_running(true);
  info.set_started_unix_nanos(NowNanos());
  info.set_label(req.label());
  runs_[id] = run;
  by_pid_[*pid] = run;
  // Recorded before it is ready: an agent that dies during the launch
  // leaves a record, and the next one stops the half-launched server.
  SaveStateLocked();
  return run;
}

AgentService::ReadyWait AgentService::AwaitReadyLine(const std::shared_ptr<Run>& run,
                                                     off_t* ready_offset, std::string* line) {
  const absl::Time ready_deadline = absl::Now() + options_.ready_timeout;
  while (true) {
    bool exited;
    {
      absl::MutexLock l(&mu_);
      exited = run->exited;
    }
    // Read after `exited`: a line written before the exit is seen.
    if (FindReadyLine(run->info.log_path(), ready_offset, line)) return ReadyWait::kReady;
    if (exited) return ReadyWait::kExited;
    if (absl::Now() >= ready_deadline) return ReadyWait::kTimeout;
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&run->exited), absl::Milliseconds(20));
  }
}

grpc::Status AgentService::Launch(grpc::ServerContext* ctx, const LaunchRequest* req,
                                  rsslab::v1::LaunchResponse* resp) {
  if (grpc::Status a = Authorize(*ctx); !a.ok()) return a;
  if (!req->command().empty()) return LaunchCommand(*req, resp);
  const Profile* profile = nullptr;
  std::vector<std::string> args;
  std::string handler;
  absl::Status valid = BuildArgs(*req, &profile, &args, &handler);
  if (!valid.ok()) return ToGrpc(valid);

  profiles::Env base = profiles::CurrentEnviron();
  for (const auto& kv : options_.extra_env) base[kv.first] = kv.second;
  profiles::Env env = profiles::BuildLaunchEnv(*profile, base);

  off_t ready_offset = 0;
  absl::StatusOr<std::shared_ptr<Run>> started =
      StartRun(*req, *profile, options_.server_binary, args, env, &ready_offset);
  if (!started.ok()) return ToGrpc(started.status());
  std::shared_ptr<Run> run = *std::move(started);

  std::string ready_line;
  const ReadyWait waited = AwaitReadyLine(run, &ready_offset, &ready_line);
  if (waited == ReadyWait::kExited) {
    absl::MutexLock l(&mu_);
    const v1::ServerProcess& info = run->info;
    std::string tail = launch::LogTail(info.log_path());
    run->info.set_log_tail(tail);
    return grpc::Status(grpc::StatusCode::ABORTED,
                        absl::StrCat("server ", info.id(), " (profile ", info.profile(),
                                     ") exited before it was ready: ",
                                     info.exit(),
                                     "; log ", info.log_path(), ", last lines:\n", tail));
  }
  if (waited == ReadyWait::kTimeout) {
    return FailLaunch(run, grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("not ready after ", absl::FormatDuration(options_.ready_timeout)));
  }
  absl::StatusOr<launch::VerifiedLaunch> launched =
      launch::VerifyLaunch(run->pid, *profile, ready_line, options_.security);
  if (!launched.ok()) {
    return FailLaunch(run, static_cast<grpc::StatusCode>(launched.status().code()),
                      std::string(launched.status().message()));
  }
  const ReadyLine* ready = &launched->ready;
  const profiles::Verification* v = &launched->verification;

  absl::MutexLock l(&mu_);
  v1::ServerProcess& info = run->info;
  info.set_data_address(ready->data_address);
  info.set_control_address(ready->control_address);
  info.set_mapped_library(v->mapped_library);
  SetHost(&info);
  for (const auto& [name, value] : v->env) {
    v1::EnvVar* e = info.add_verified_env();
    e->set_name(name);
    e->set_value(value);
  }
  SaveStateLocked();
  *resp->mutable_server() = info;
  return grpc::Status::OK;
}

grpc::Status AgentService::NotReady(const std::shared_ptr<Run>& run, ReadyWait waited) {
  if (waited == ReadyWait::kExited) {
    absl::MutexLock l(&mu_);
    const v1::ServerProcess& info = run->info;
    std::string tail = launch::LogTail(info.log_path());
    run->info.set_log_tail(tail);
    return grpc::Status(grpc::StatusCode::ABORTED,
                        absl::StrCat(info.command().empty() ? "server " : "command ", info.id(),
                                     " (profile ", info.profile(), ") exited before it was ready: ",
                                     info.exit(), "; log ", info.log_path(), ", last lines:\n",
                                     tail));
  }
  return FailLaunch(run, grpc::StatusCode::DEADLINE_EXCEEDED,
                    absl::StrCat("not ready after ", absl::FormatDuration(options_.ready_timeout)));
}

AgentService::ReadyWait AgentService::AwaitCommandReady(const std::shared_ptr<Run>& run,
                                                        const commands::Command& cmd, int port,
                                                        off_t* offset) {
  const absl::Time deadline = absl::Now() + options_.ready_timeout;
  std::string line;
  while (true) {
    bool exited;
    {
      absl::MutexLock l(&mu_);
      exited = run->exited;
    }
    const bool ready = cmd.ready != nullptr
                           ? commands::FindMatchingLine(run->info.log_path(), *cmd.ready, offset,
                                                        &line)
                           : commands::PortAccepts(options_.server_host, port);
    if (ready && !exited) return ReadyWait::kReady;
    if (exited) return ReadyWait::kExited;
    if (absl::Now() >= deadline) return ReadyWait::kTimeout;
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&run->exited), absl::Milliseconds(20));
  }
}

grpc::Status AgentService::LaunchCommand(const LaunchRequest& req,
                                         rsslab::v1::LaunchResponse* resp) {
  auto it = options_.commands.find(req.command());
  if (it == options_.commands.end()) {
    std::vector<std::string> names;
    for (const auto& [n, c] : options_.commands) names.push_back(n);
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("command '", req.command().substr(0, 64),
                                     "' is not one this agent was started with (--allow_command: ",
                                     names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  const commands::Command& cmd = it->second;
  if (!req.handler().empty() || !req.server_flags().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "a command takes neither handler nor server_flags: its arguments come "
                        "from the agent's --allow_command_args template only");
  }
  absl::StatusOr<const Profile*> profile = RequestedProfile(req);
  if (!profile.ok()) return ToGrpc(profile.status());
  commands::Values values;
  values.threads = req.threads() == 0 ? 4 : req.threads();
  values.host = options_.server_host;
  absl::StatusOr<int> port = commands::PickFreePort(options_.server_host);
  if (!port.ok()) return ToGrpc(port.status());
  values.port = *port;
  if (cmd.uses_control_port) {
    absl::StatusOr<int> cport = commands::PickFreePort(options_.server_host);
    if (!cport.ok()) return ToGrpc(cport.status());
    values.control_port = *cport;
  }
  profiles::Env base = profiles::CurrentEnviron();
  for (const auto& kv : options_.extra_env) base[kv.first] = kv.second;
  const profiles::Env env = profiles::BuildLaunchEnv(**profile, base);
  off_t offset = 0;
  absl::StatusOr<std::shared_ptr<Run>> started =
      StartRun(req, **profile, cmd.path, commands::Expand(cmd, values), env, &offset);
  if (!started.ok()) return ToGrpc(started.status());
  std::shared_ptr<Run> run = *std::move(started);
  const ReadyWait waited = AwaitCommandReady(run, cmd, values.port, &offset);
  if (waited != ReadyWait::kReady) return NotReady(run, waited);
  // The same /proc checks as for the server: the library mapped, the
  // profile's variables in the environment. A refusal names the profile.
  absl::StatusOr<profiles::Verification> v = profiles::VerifyProfile(run->pid, **profile);
  if (!v.ok()) {
    return FailLaunch(run, grpc::StatusCode::FAILED_PRECONDITION, std::string(v.status().message()));
  }
  absl::MutexLock l(&mu_);
  v1::ServerProcess& info = run->info;
  info.set_data_address(JoinHostPort(options_.server_host, values.port));
  if (cmd.uses_control_port) {
    info.set_control_address(JoinHostPort(options_.server_host, values.control_port));
  }
  info.set_mapped_library(v->mapped_library);
  SetHost(&info);
  for (const auto& [name, value] : v->env) {
    v1::EnvVar* e = info.add_verified_env();
    e->set_name(name);
    e->set_value(value);
  }
  SaveStateLocked();
  *resp->mutable_server() = info;
  return grpc::Status::OK;
}

grpc::Status AgentService::FailLaunch(const std::shared_ptr<Run>& run, grpc::StatusCode code,
                                      const std::string& why) {
  {
    absl::MutexLock l(&mu_);
    SignalLocked(*run, SIGKILL);
  }
  AwaitExit(run, absl::Seconds(30));
  absl::MutexLock l(&mu_);
  std::string tail = launch::LogTail(run->info.log_path());
  run->info.set_log_tail(tail);
  return grpc::Status(code, absl::StrCat("server ", run->info.id(), " (pid ", run->pid,
                                         ") killed: ", why, "; log ", run->info.log_path()));
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
  std::shared_ptr<Run> run;
  {
    absl::MutexLock l(&mu_);
    auto it = runs_.find(req->id());
    if (it == runs_.end()) {
      std::vector<std::string> ids;
      for (const auto& kv : runs_) ids.push_back(kv.first);
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no server '", req->id(), "' (known: ",
                                       ids.empty() ? "none" : absl::StrJoin(ids, ", "), ")"));
    }
    run = it->second;
  }
  if (req->grace_ms() < 0 || req->grace_ms() > 600000) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "grace_ms must be in [0, 600000]");
  }
  Terminate(run, absl::Milliseconds(req->grace_ms() == 0 ? 5000 : req->grace_ms()));
  absl::MutexLock l(&mu_);
  if (!run->exited) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("server ", req->id(), " (pid ", run->pid,
                                     ") did not exit after SIGKILL"));
  }
  run->info.set_log_tail(launch::LogTail(run->info.log_path()));
  *resp->mutable_server() = run->info;
  return grpc::Status::OK;
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
                        absl::StrCat("no running server '", req->id().substr(0, 100), "'"));
  }
  // Under mu_: while not reaped, the pid is this run's (alive or a zombie).
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
        SignalLocked(*kv.second, SIGTERM);
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
  state.set_next_id(next_id_);
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
  next_id_ = std::max(next_id_, state->next_id());
  for (const v1::AgentStateServer& rec : state->servers()) {
    const v1::ServerProcess& was = rec.server();
    // Ids are sNNNN-...: keep new ones clear of every recorded one.
    int n = 0;
    if (was.id().size() > 5 && absl::SimpleAtoi(was.id().substr(1, 4), &n)) {
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
