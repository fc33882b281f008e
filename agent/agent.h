// rsslab_agent's Agent service: launches the one configured rsslab_server
// binary under named profiles, verifies each launch in /proc, stops servers
// and reports how they exited.
//
// Example:
//
//   rsslab::AgentService::Options o;
//   o.server_binary = "/opt/rsslab/bin/rsslab_server";
//   o.profiles = *rsslab::profiles::LoadProfiles("agent/profiles.textproto");
//   o.handler_dirs = {"/opt/rsslab/server/handlers"};
//   o.log_dir = "/tmp/rsslab_agent";
//   o.server_host = "127.0.0.1";
//   rsslab::AgentService agent(o);
//   grpc::ServerBuilder b;
//   b.RegisterService(&agent);
//   ...
//   agent.StopAll(absl::Seconds(5));  // before exiting
//
// Security model: whoever can reach the agent can start and stop servers,
// nothing more. No request field is ever a path, a command or an
// environment variable: profile and handler are plain names looked up in
// the agent's own configuration, and server flags come from a fixed
// allowlist with per-flag value checks.
#ifndef RSSLAB_AGENT_AGENT_H_
#define RSSLAB_AGENT_AGENT_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/commands.h"
#include "agent/launch.h"
#include "proto/agent.grpc.pb.h"
#include "proto/profile.pb.h"
#include "common/auth.h"

namespace rsslab {

class AgentService final : public rsslab::v1::Agent::Service {
 public:
  struct Options {
    std::string server_binary;
    rsslab::v1::ProfileSet profiles;
    // Directories holding NAME.py handlers; the first match wins.
    std::vector<std::string> handler_dirs;
    std::string log_dir;
    // Servers listen on this host, ports picked by the kernel (port 0).
    std::string server_host = "127.0.0.1";
    // Running servers at most; Launch beyond it is RESOURCE_EXHAUSTED.
    int max_servers = 8;
    int max_threads = 1024;
    absl::Duration ready_timeout = absl::Seconds(60);
    // Extra environment for every server (e.g. RSSLAB_HOME), never from RPC.
    std::map<std::string, std::string> extra_env;
    // Checks each caller's token when set (not owned).
    const Security* security = nullptr;
    // Credential flags every launched server gets (the agent's own
    // --auth_token_file / --tls_* files), so its servers are as protected
    // as the agent itself.
    std::vector<std::string> server_security_args;
    // STATE_DIR/servers.json (agent_state.h): every launched server is
    // recorded there, and servers an earlier agent left running are adopted
    // from it. Empty: nothing is recorded.
    std::string state_file;
    // Each launch's log is capped at this many bytes (agent/log_cap.h: its
    // head and tail kept), written by log_writer_binary (the agent's own
    // binary); 0: not capped, the program writes its log itself.
    int64_t log_max_bytes = 0;
    std::string log_writer_binary;
    // --allow_command: the user's programs a Launch may name (commands.h).
    std::map<std::string, commands::Command> commands;
  };

  explicit AgentService(Options options);
  ~AgentService() override;  // StopAll, then joins the reaper

  grpc::Status Launch(grpc::ServerContext* ctx, const rsslab::v1::LaunchRequest* req,
                      rsslab::v1::LaunchResponse* resp) override;
  grpc::Status Stop(grpc::ServerContext* ctx, const rsslab::v1::StopRequest* req,
                    rsslab::v1::StopResponse* resp) override;
  grpc::Status List(grpc::ServerContext* ctx, const rsslab::v1::ListRequest* req,
                    rsslab::v1::ListResponse* resp) override;
  grpc::Status ListProfiles(grpc::ServerContext* ctx, const rsslab::v1::ListProfilesRequest* req,
                            rsslab::v1::ListProfilesResponse* resp) override;
  // A running launch's memory from /proc/PID (for a command without Control).
  grpc::Status ProcSnapshot(grpc::ServerContext* ctx, const rsslab::v1::ProcSnapshotRequest* req,
                            rsslab::v1::Snapshot* resp) override;

  // SIGTERM to every running server, SIGKILL after `grace`.
  void StopAll(absl::Duration grace);

  // Reads options.state_file (call once, before serving): each recorded
  // server that still runs (same pid, start time and binary) is adopted;
  // the others are reported once as lost and dropped. One line per server
  // for the agent's log in *log. A state file that does not parse is moved
  // aside to servers.json.corrupt-TIME and named in a warning line: the
  // agent starts either way.
  void AdoptFromState(std::vector<std::string>* log);

  // The allowlisted server flags and what each accepts (for usage text).
  static std::string AllowedFlagsHelp();

 private:
  struct Run {
    rsslab::v1::ServerProcess info;
    pid_t pid = -1;
    bool exited = false;
    // Started by an earlier agent: not our child, so its death is seen by
    // polling /proc (WatchAdopted), never by waitpid.
    bool adopted = false;
    uint64_t start_ticks = 0;
    std::vector<std::string> args;
    // Launch order (the id's number), for dropping the oldest ended runs.
    uint64_t seq = 0;
    std::string binary;  // what was executed: the server, or a command's path
    // A capped log's writer (null: none, or not launched by this agent).
    std::shared_ptr<launch::LogWriterDone> log_writer;
    // Stop: the first caller stops it; later ones wait for its answer.
    bool stop_started = false;
    bool stop_finished = false;
    grpc::Status stop_status;
    rsslab::v1::StopResponse stop_response;
  };
  // Ended runs kept for List and Stop (their exit status); older ones are
  // forgotten.
  static constexpr size_t kKeepEnded = 64;
  void ForgetOldRunsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  class RunChild;  // launch::Child: forks under mu_, reaped by ReaperLoop

  // Checks a request and fills the launch's arguments (fixed ones and the
  // request's server flags); INVALID_ARGUMENT or NOT_FOUND naming the
  // offending field otherwise.
  // A request naming a command (LaunchRequest.command) gets the command's
  // program and template-made arguments instead, with the ports picked into
  // *ports (no handler, no server flags).
  absl::Status BuildArgs(const rsslab::v1::LaunchRequest& req, const rsslab::v1::Profile** profile,
                         launch::LaunchOptions* lo, commands::Values* ports);
  // RESOURCE_EXHAUSTED at max_servers running, UNAVAILABLE while shutting down.
  absl::Status CheckCapacityLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string LogHeader(const std::string& id, const launch::LaunchOptions& lo,
                        const rsslab::v1::Profile& profile) const;
  void ReaperLoop();
  // Notices adopted servers' deaths (/proc polling) until the destructor.
  void WatchAdopted();
  // Marks an adopted run ended (not our child: no exit status).
  void MarkAdoptedEnded(Run* run, const std::string& how) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A signal to a run: only while it is still that process (children are
  // ours until reaped; an adopted pid is checked against its start time).
  void SignalLocked(const Run& run, int sig) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rewrites the state file with every running server; a failure is logged
  // (the servers are fine; only a restart would miss them).
  void SaveStateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits until the run has been reaped, up to `timeout`; true if it was.
  bool AwaitExit(const std::shared_ptr<Run>& run, absl::Duration timeout);
  // SIGTERM, SIGKILL after grace; returns once reaped (or SIGKILL failed).
  void Terminate(const std::shared_ptr<Run>& run, absl::Duration grace);
  grpc::Status Authorize(const grpc::ServerContext& ctx) const;

  const Options options_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);
  std::map<pid_t, std::shared_ptr<Run>> by_pid_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int live_children_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_watcher_ ABSL_GUARDED_BY(mu_) = false;
  bool state_error_logged_ ABSL_GUARDED_BY(mu_) = false;
  std::thread reaper_;
  std::thread watcher_;
};

}  // namespace rsslab

#endif  // RSSLAB_AGENT_AGENT_H_
