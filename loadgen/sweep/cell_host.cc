#include "loadgen/sweep/cell_host.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "common/procfs/outside_snapshot.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "agent/exit_text.h"
#include "agent/launch.h"
#include "agent/profiles.h"
#include "agent/verify_launch.h"
#include "agent/stop_outcome.h"
#include "common/server_flags.h"
#include "common/shipped.h"
#include "grpcpp/grpcpp.h"
#include "loadgen/receive_bound.h"
#include "loadgen/status_code.h"
#include "proto/agent.grpc.pb.h"

namespace rsslab {
namespace {

using ::rsslab::v1::ServerProcess;

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

// ---------------------------------------------------------------------------
// Through rsslab_agent.

class AgentHost : public CellHost {
 public:
  explicit AgentHost(const AgentHostOptions& o)
      : o_(o),
        channel_([&o] {
          grpc::ChannelArguments args;
          BoundReceive(&args, o.max_receive_mb);
          return o.security != nullptr
                     ? o.security->Channel(o.address, args)
                     : grpc::CreateCustomChannel(o.address, grpc::InsecureChannelCredentials(),
                                                 args);
        }()),
        stub_(rsslab::v1::Agent::NewStub(channel_)) {
    where_.set_agent(o.address);
  }

  const std::string& name() const override { return o_.address; }
  rsslab::v1::HostInfo Where() const override { return where_; }

  absl::Status Prepare(const rsslab::v1::Sweep& sweep) override {
    if (!channel_->WaitForConnected(Deadline(o_.connect_timeout))) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot reach rsslab_agent at %s within %s (start it with "
          "rsslab_agent --listen=... on the server's machine)",
          o_.address, absl::FormatDuration(o_.connect_timeout)));
    }
    // Unknown profiles fail here, before the first of many cells runs.
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(absl::Seconds(30)));
    rsslab::v1::ListProfilesResponse known;
    grpc::Status gs = stub_->ListProfiles(&cc, {}, &known);
    if (!gs.ok()) {
      return absl::UnavailableError(
          absl::StrCat("ListProfiles at ", o_.address, " failed: ", gs.error_message()));
    }
    std::vector<std::string> unknown;
    for (const std::string& p : sweep.profiles()) {
      if (std::find(known.names().begin(), known.names().end(), p) == known.names().end()) {
        unknown.push_back(p);
      }
    }
    if (!unknown.empty()) {
      return absl::NotFoundError(absl::StrFormat(
          "the agent at %s has no profile %s (it has: %s)", o_.address,
          absl::StrJoin(unknown, ", "), absl::StrJoin(known.names(), ", ")));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ServerProcess> Launch(const SweepCell& cell, const rsslab::v1::Scenario& scenario,
                                       bool* host_lost) override {
    const auto& sw = scenario.sweep();
    rsslab::v1::LaunchRequest lr;
    lr.set_profile(cell.profile);
    lr.set_threads(cell.threads);
    lr.set_handler(sw.handler());
    for (const auto& [k, v] : sw.server_flags()) (*lr.mutable_server_flags())[k] = v;
    lr.set_command(sw.command());  // the user's program (--command), or the server
    lr.set_label(absl::StrCat(scenario.name(), " ", cell.id));
    rsslab::v1::LaunchResponse launched;
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(o_.launch_timeout));
    grpc::Status ls = stub_->Launch(&cc, lr, &launched);
    if (ls.ok()) return launched.server();
    *host_lost = Lost(ls);
    // The agent's message carries the exit status and log tail.
    return absl::Status(static_cast<absl::StatusCode>(ls.error_code()),
                        absl::StrCat("Launch: ", StatusCodeName(ls.error_code()), ": ",
                                     ls.error_message()));
  }

  absl::StatusOr<ServerProcess> Stop(const ServerProcess& server, int grace_ms,
                                     bool* host_lost) override {
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(absl::Milliseconds(grace_ms) + absl::Seconds(30)));
    rsslab::v1::StopRequest sr;
    sr.set_id(server.id());
    sr.set_grace_ms(grace_ms);
    rsslab::v1::StopResponse stopped;
    grpc::Status ss = stub_->Stop(&cc, sr, &stopped);
    if (ss.ok()) return stopped.server();
    *host_lost = Lost(ss);
    return absl::UnavailableError(absl::StrCat("Stop: ", ss.error_message()));
  }

  absl::StatusOr<rsslab::v1::Snapshot> OutsideSnapshot(const ServerProcess& server) override {
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(absl::Seconds(30)));
    rsslab::v1::ProcSnapshotRequest req;
    req.set_id(server.id());
    rsslab::v1::Snapshot snap;
    grpc::Status s = stub_->ProcSnapshot(&cc, req, &snap);
    if (!s.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat("ProcSnapshot: ", s.error_message()));
    }
    return snap;
  }

 private:
  // The agent itself is gone (not just this call refused).
  bool Lost(const grpc::Status& s) {
    return (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
            s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
           channel_->GetState(false) != GRPC_CHANNEL_READY;
  }

  const AgentHostOptions o_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rsslab::v1::Agent::Stub> stub_;
  rsslab::v1::HostInfo where_;
};

// ---------------------------------------------------------------------------
// Launched here, without an agent.

// A started server and what the sweep records about it.
struct LocalServer {
  launch::Started started;
  std::shared_ptr<launch::OwnChild> child;
  ServerProcess info;
};

class LocalHost : public CellHost {
 public:
  explicit LocalHost(LocalHostOptions o) : o_(std::move(o)) {
    where_ = HostInfoOf(CurrentHost());
    where_.set_server_cpus(FormatCpuList(o_.server_cpus));
    where_.set_loadgen_cpus(FormatCpuList(o_.loadgen_cpus));
  }
  // Each LocalServer's OwnChild SIGKILLs a server still running and reaps it.
  ~LocalHost() override = default;

  const std::string& name() const override { return name_; }
  rsslab::v1::HostInfo Where() const override { return where_; }

  // What an agent would refuse is refused here, before the first cell: an
  // unknown profile, handler or command, a server flag outside the agent's
  // allowlist.
  absl::Status Prepare(const rsslab::v1::Sweep& sweep) override {
    std::vector<std::string> unknown;
    for (const std::string& p : sweep.profiles()) {
      if (profiles::FindProfile(o_.profiles, p) == nullptr) unknown.push_back(p);
    }
    if (!unknown.empty()) {
      return absl::NotFoundError(absl::StrFormat("no profile %s (the profiles file has: %s)",
                                                 absl::StrJoin(unknown, ", "),
                                                 profiles::ProfileNames(o_.profiles)));
    }
    if (!sweep.command().empty()) {
      return commands::Lookup(o_.commands, sweep.command(), "this loadgen").status();
    }
    if (o_.server_binary.empty()) {
      return absl::NotFoundError("--local: no rsslab_server to run; pass --server_binary=PATH");
    }
    for (const auto& [k, v] : sweep.server_flags()) {
      if (absl::Status s = CheckServerFlag(k, v, FlagSource::kRequest); !s.ok()) return s;
    }
    return launch::FindHandler(sweep.handler(), o_.handler_dirs).status();
  }

  absl::StatusOr<ServerProcess> Launch(const SweepCell& cell, const rsslab::v1::Scenario& scenario,
                                       bool* host_lost) override {
    *host_lost = false;
    const auto& sw = scenario.sweep();
    const rsslab::v1::Profile* profile = profiles::FindProfile(o_.profiles, cell.profile);
    if (profile == nullptr) return absl::NotFoundError(absl::StrCat("no profile ", cell.profile));
    if (mkdir(o_.log_dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat("cannot create ", o_.log_dir, ": ", strerror(errno)));
    }
    const std::string base = absl::StrFormat("local-%04d-%s-t%d", cell.index, cell.profile,
                                             cell.threads);
    // A resumed run runs a cell again in the same directory: the earlier
    // attempt's server log (what its records point at) stays.
    std::string id = base;
    for (int n = 2;
         n < 1000 && access(absl::StrCat(o_.log_dir, "/", id, ".log").c_str(), F_OK) == 0; ++n) {
      id = absl::StrCat(base, "-", n);
    }
    auto s = std::make_unique<LocalServer>();
    s->child = std::make_shared<launch::OwnChild>();
    launch::LaunchOptions lo;
    const commands::Command* cmd = nullptr;
    commands::Values values;
    if (!sw.command().empty()) {
      absl::StatusOr<const commands::Command*> found =
          commands::Lookup(o_.commands, sw.command(), "this loadgen");
      if (!found.ok()) return found.status();
      cmd = *found;
      if (absl::Status c = commands::Configure(*cmd, "127.0.0.1", cell.threads, &lo, &values);
          !c.ok()) {
        return c;
      }
      lo.name = absl::StrCat("command ", cmd->name, " ", id);
    } else {
      absl::StatusOr<std::string> handler = launch::FindHandler(sw.handler(), o_.handler_dirs);
      if (!handler.ok()) return handler.status();
      ServerOptions(id, cell, *handler, sw, &lo);
    }
    CommonOptions(id, *profile, &lo);
    lo.child = s->child;
    absl::StatusOr<launch::Started> started = launch::StartVerifiedServer(lo);
    if (!started.ok()) return started.status();
    s->started = *std::move(started);
    const launch::VerifiedLaunch& v = s->started.verified;
    ServerProcess& info = s->info;
    if (cmd != nullptr) {
      std::string data, control;
      absl::Status a = commands::AddressesOrStop(*cmd, values, s->started, &data, &control);
      if (!a.ok()) return a;
      info.set_command(cmd->name);
      info.set_data_address(data);
      info.set_control_address(control);
    } else {
      info.set_handler(sw.handler().empty() ? std::string(kDefaultHandlerName) : sw.handler());
      info.set_data_address(v.ready.data_address);
      info.set_control_address(v.ready.control_address);
    }
    info.set_id(id);
    info.set_pid(s->started.pid);
    info.set_profile(profile->name());
    info.set_threads(cell.threads);
    info.set_log_path(lo.log_path);
    info.set_running(true);
    info.set_started_unix_nanos(absl::ToUnixNanos(absl::Now()));
    info.set_label(absl::StrCat(scenario.name(), " ", cell.id));
    info.set_mapped_library(v.verification.mapped_library);
    for (const auto& [name, value] : v.verification.env) {
      rsslab::v1::EnvVar* e = info.add_verified_env();
      e->set_name(name);
      e->set_value(value);
    }
    ServerProcess out = info;
    servers_[id] = std::move(s);
    return out;
  }

  absl::StatusOr<rsslab::v1::Snapshot> OutsideSnapshot(const ServerProcess& server) override {
    return procfs::OutsideSnapshot(server.pid());
  }

  absl::StatusOr<ServerProcess> Stop(const ServerProcess& server, int grace_ms,
                                     bool* host_lost) override {
    *host_lost = false;
    auto it = servers_.find(server.id());
    if (it == servers_.end()) return absl::NotFoundError(absl::StrCat("no server ", server.id()));
    LocalServer* s = it->second.get();
    // Reaped already, or ending: it ended on its own, before this stop.
    const bool ended_before =
        s->child->AwaitExit(absl::ZeroDuration()) || launch::EndedOrEnding(s->started.pid);
    launch::StopStarted(s->started, absl::Milliseconds(grace_ms));
    const int st = s->child->wait_status();
    ServerProcess info = s->info;
    info.set_running(false);
    info.set_exit(launch::DescribeExit(st));
    info.set_exit_code(WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    info.set_term_signal(WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    info.set_ended_unix_nanos(absl::ToUnixNanos(absl::Now()));
    info.set_ended_before_stop(ended_before);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) info.set_log_tail(launch::LogTail(info.log_path()));
    servers_.erase(it);
    return info;
  }

 private:
  // The agent's launch, here: the same fixed arguments, the scenario's
  // server flags through the agent's allowlist, VerifyLaunch.
  void ServerOptions(const std::string& id, const SweepCell& cell, const std::string& handler,
                     const rsslab::v1::Sweep& sw, launch::LaunchOptions* lo) const {
    lo->program = o_.server_binary;
    lo->name = "server " + id;
    lo->fixed_args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                      absl::StrCat("--threads=", cell.threads), "--handler=" + handler};
    for (const auto& [k, v] : std::map<std::string, std::string>(sw.server_flags().begin(),
                                                                  sw.server_flags().end())) {
      lo->flags.emplace_back(k, v);
    }
    lo->flag_check = launch::LaunchOptions::FlagCheck::kRequest;
  }

  // Both kinds: the profile, the output read from a pipe, the log, pinning.
  void CommonOptions(const std::string& id, const rsslab::v1::Profile& profile,
                     launch::LaunchOptions* lo) const {
    lo->profile = &profile;
    lo->output = launch::Output::kPipe;
    if (o_.log_max_bytes > 0) {
      // Capped as the agent's launches are: the program's output through a
      // log writer of its own (agent/log_cap.h), the ready line read back
      // from the log.
      lo->output = launch::Output::kLogFile;
      lo->log_max_bytes = o_.log_max_bytes;
      lo->log_writer_binary = o_.log_writer_binary;
    }
    lo->log_path = absl::StrCat(o_.log_dir, "/", id, ".log");
    lo->log_header = absl::StrCat("# rsslab_loadgen --local ", id, ": ", lo->program, " ",
                                  commands::JoinQuoted(launch::LaunchArgs(*lo)), "\n");
    lo->ready_timeout = o_.ready_timeout;
    lo->cpus = o_.server_cpus;
    // A loadgen killed outright (SIGKILL by a batch system) takes its
    // server with it. The forking thread is the sweep's worker, which
    // outlives every server it starts.
    lo->parent_death_signal = SIGKILL;
  }

  const LocalHostOptions o_;
  const std::string name_ = "local";
  rsslab::v1::HostInfo where_;
  std::map<std::string, std::unique_ptr<LocalServer>> servers_;
};

}  // namespace

rsslab::v1::HostInfo HostInfoOf(const HostFacts& f) {
  rsslab::v1::HostInfo h;
  h.set_hostname(f.hostname);
  h.set_kernel(f.kernel);
  h.set_cpu_model(f.cpu_model);
  h.set_cpus(f.cpus);
  h.set_mem_total_bytes(f.mem_total_bytes);
  return h;
}

std::unique_ptr<CellHost> MakeAgentHost(const AgentHostOptions& options) {
  return std::make_unique<AgentHost>(options);
}

std::unique_ptr<CellHost> MakeLocalHost(LocalHostOptions options) {
  return std::make_unique<LocalHost>(std::move(options));
}

}  // namespace rsslab
