// rsslab_agent: runs on the server's machine; launches, verifies, stops and
// reports on rsslab_server processes over the Agent service.
//
//   rsslab_agent --listen=127.0.0.1:50060 --server_binary=bin/rsslab_server
//       --profile_file=agent/profiles.textproto [--log_dir=DIR] [--max_servers=N]
//
// Prints one line on stdout when ready:
//   rsslab_agent ready listen=HOST:PORT pid=PID
// On SIGTERM/SIGINT it stops every server it started (SIGTERM, SIGKILL after
// --stop_grace_ms) and exits 0. Killed or crashed instead, it leaves its
// servers running, recorded in --state_dir, and the next agent started on
// that directory adopts them (or reports them lost).
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/agent.h"
#include "agent/command_flags.h"
#include "agent/commands.h"
#include "agent/agent_state.h"
#include "agent/log_cap.h"
#include "agent/profiles.h"
#include "grpcpp/grpcpp.h"
#include "common/flags_parse.h"
#include "common/protobuf_log.h"
#include "common/auth.h"
#include "common/listen.h"
#include "common/units.h"
#include "common/shipped.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50060", "Agent service address (port 0: pick one).");
ABSL_FLAG(std::string, server_binary, "", "The rsslab_server binary: the only program this agent runs.");
ABSL_FLAG(std::string, profile_file, "",
          "Profiles file(s), comma-separated (agent/profiles.textproto).");
ABSL_FLAG(std::string, profiles, "", "Deprecated spelling of --profile_file.");
ABSL_FLAG(std::string, handler_dirs, "",
          "Comma-separated directories of NAME.py handlers (default: server/handlers next to "
          "the server binary's tree).");
ABSL_FLAG(std::string, log_dir, "", "Per-server log files go here (default: $TMPDIR/rsslab_agent-PID).");
ABSL_FLAG(int, log_max_mb, 8,
          "Each launched program's log is capped at this many MiB (1 to 65536): its first and "
          "last quarter of the cap kept, the middle dropped with a line saying how many bytes "
          "went. 0: no cap.");
ABSL_FLAG(int, max_servers, 8, "Servers running at once, at most.");
ABSL_FLAG(std::string, server_host, "",
          "Host servers listen on (ports chosen by the kernel); default: the --listen host. "
          "With --listen=0.0.0.0:..., set it to this machine's address so the returned "
          "addresses can be dialled from the load generator's machine.");
ABSL_FLAG(int, ready_timeout_s, 60,
          "How long a server may take to print its ready line (a command: to be ready as its "
          "--allow_command_ready / _ready_port say).");
ABSL_FLAG(int, stop_grace_ms, 5000, "On agent shutdown: SIGTERM, then SIGKILL after this.");
ABSL_FLAG(std::string, state_dir, "",
          "Where the agent records the servers it runs (servers.json), so that an agent "
          "restarted after a crash adopts the servers still running. Default with a fixed "
          "--listen port: $XDG_RUNTIME_DIR/rsslab_agent-PORT, or /tmp/rsslab_agent-UID-PORT; "
          "with port 0: none (a restarted agent would have another address anyway). "
          "'none': record nothing.");

namespace rsslab {
namespace {

[[noreturn]] void Die(const std::string& msg) {
  fprintf(stderr, "rsslab_agent: %s\n", msg.c_str());
  exit(2);
}

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : "";
}

// Numbers first: a usage error must leave nothing behind (no --log_dir).
void CheckNumbers() {
  for (const absl::Status& s :
       {CheckRange(absl::GetFlag(FLAGS_max_servers), "--max_servers", 1, 256),
        CheckRange(absl::GetFlag(FLAGS_ready_timeout_s), "--ready_timeout_s", 1, 3600, " (s)"),
        CheckRange(absl::GetFlag(FLAGS_stop_grace_ms), "--stop_grace_ms", 0, 600000, " (ms)"),
        CheckRange(absl::GetFlag(FLAGS_log_max_mb), "--log_max_mb", 0, 65536, " (MiB)")}) {
    if (!s.ok()) Die(std::string(s.message()));
  }

}

// The one server binary this agent launches, and its profiles.
void ServerAndProfiles(int argc, char** argv, AgentService::Options* o_out) {
  AgentService::Options& o = *o_out;
  if (absl::GetFlag(FLAGS_server_binary).empty()) Die("--server_binary is required");
  o.server_binary = RealPath(absl::GetFlag(FLAGS_server_binary));
  if (o.server_binary.empty() || access(o.server_binary.c_str(), X_OK) != 0) {
    Die(absl::StrCat("--server_binary=", absl::GetFlag(FLAGS_server_binary),
                     " is not an executable file"));
  }
  std::string note;
  absl::StatusOr<std::string> file = profiles::ProfileFileFlag(
      absl::GetFlag(FLAGS_profile_file), absl::GetFlag(FLAGS_profiles), &note);
  if (!file.ok()) Die(std::string(file.status().message()));
  if (!note.empty()) fprintf(stderr, "rsslab_agent: %s\n", note.c_str());
  if (file->empty()) Die("--profile_file is required");
  absl::StatusOr<v1::ProfileSet> set = profiles::LoadProfiles(*file);
  if (!set.ok()) Die(std::string(set.status().message()));
  o.profiles = *set;
  // Repeated flags, each value whole (a template has spaces and may have
  // commas): read from argv, not from the flags library's last value.
  absl::StatusOr<std::map<std::string, commands::Command>> cmds =
      commands::FromFlags(argc, argv);
  if (!cmds.ok()) Die(std::string(cmds.status().message()));
  o.commands = *std::move(cmds);

}

// --handler_dirs, or the handlers shipped beside the server binary.
std::string HandlerDirs(AgentService::Options* o_out) {
  AgentService::Options& o = *o_out;
  std::string dirs = absl::GetFlag(FLAGS_handler_dirs);
  if (dirs.empty()) {
    // Next to the server binary this agent runs (bin/ -> server/handlers,
    // Bazel: its runfiles). Under `bazel test` the server's own runfiles tree
    // may not be built yet; the test's runfiles ($RUNFILES_DIR) hold the
    // handlers whenever the server is its data.
    dirs = FindShippedNear(o.server_binary, kHandlersDir);
    if (dirs.empty()) Die("cannot find server/handlers next to the server binary; pass --handler_dirs");
  }
  for (absl::string_view d : absl::StrSplit(dirs, ',', absl::SkipEmpty())) {
    std::string real = RealPath(std::string(d));
    if (real.empty()) Die(absl::StrCat("--handler_dirs: ", d, " does not exist"));
    o.handler_dirs.push_back(real);
  }

  return dirs;
}

// Where the servers' logs go: --log_dir, created, or a fresh one in TMPDIR.
void LogDir(AgentService::Options* o_out) {
  AgentService::Options& o = *o_out;
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  if (o.log_dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    o.log_dir = absl::StrCat(tmp ? tmp : "/tmp", "/rsslab_agent-", getpid());
  }
  mkdir(o.log_dir.c_str(), 0755);
  o.log_dir = RealPath(o.log_dir);
  if (o.log_dir.empty() || access(o.log_dir.c_str(), W_OK) != 0) {
    Die(absl::StrCat("--log_dir=", absl::GetFlag(FLAGS_log_dir), " is not a writable directory"));
  }
}

// --listen checked (its address, protection, and that it is free); the
// servers' host and credentials follow from it.
HostPort Listen(const Security& security, AgentService::Options* o_out) {
  AgentService::Options& o = *o_out;
  const std::string listen = absl::GetFlag(FLAGS_listen);
  absl::StatusOr<HostPort> hp = ParseHostPort(listen);
  if (!hp.ok()) Die(absl::StrCat(hp.status().message(), " (--listen)"));
  o.server_host = absl::GetFlag(FLAGS_server_host).empty() ? hp->host : absl::GetFlag(FLAGS_server_host);
  if (absl::Status s = security.CheckListen(listen, "listen"); !s.ok()) {
    Die(std::string(s.message()));
  }
  o.security = &security;
  // Servers get the agent's own credentials, so they are as protected as
  // the agent itself.
  o.server_security_args = security.FlagsForChild();
  absl::Status bindable = CheckBindable(listen);
  if (!bindable.ok()) Die(absl::StrCat(bindable.message(), " (--listen)"));
  return *hp;
}

// The state directory (per user and port by default; "none": no state),
// locked for this agent's lifetime. The lock's descriptor, or -1.
int StateDir(const HostPort& hp, AgentService::Options* o_out) {
  AgentService::Options& o = *o_out;
  std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  if (state_dir.empty() && hp.port != 0) {
    // Per user and per port: two agents of one user on one machine listen on
    // different ports, so they never share (and adopt each other's) servers.
    const char* run = getenv("XDG_RUNTIME_DIR");
    state_dir = run != nullptr && *run == '/'
                    ? absl::StrCat(run, "/rsslab_agent-", hp.port)
                    : absl::StrCat("/tmp/rsslab_agent-", geteuid(), "-", hp.port);
  }
  if (state_dir == "none") state_dir.clear();
  int state_lock = -1;
  if (!state_dir.empty()) {
    if (absl::Status s = agent_state::PrepareDir(state_dir); !s.ok()) Die(std::string(s.message()));
    absl::StatusOr<int> lock = agent_state::LockDir(state_dir);
    if (!lock.ok()) Die(std::string(lock.status().message()));
    state_lock = *lock;  // held until exit
    o.state_file = absl::StrCat(RealPath(state_dir), "/", agent_state::kStateFile);
  }

  return state_lock;
}

// Serves until SIGTERM or SIGINT, then stops every server.
int Serve(const AgentService::Options& o, const Security& security, const HostPort& hp,
          const std::string& dirs, const sigset_t& stop) {
  const std::string listen = absl::GetFlag(FLAGS_listen);
  auto agent = std::make_unique<AgentService>(o);
  std::vector<std::string> adopted;
  agent->AdoptFromState(&adopted);
  for (const std::string& line : adopted) fprintf(stderr, "rsslab_agent: %s\n", line.c_str());
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  b.AddListeningPort(listen, security.ServerCredentials(), &port);
  b.RegisterService(agent.get());
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr || port == 0) Die(absl::StrCat("cannot listen on ", listen));
  fprintf(stderr, "rsslab_agent: server %s, %d profiles, handlers in %s, logs in %s, state %s\n",
          o.server_binary.c_str(), o.profiles.profile_size(), dirs.c_str(), o.log_dir.c_str(),
          o.state_file.empty() ? "not recorded (--state_dir)" : o.state_file.c_str());
  printf("rsslab_agent ready listen=%s pid=%d\n", JoinHostPort(hp.host, port).c_str(), getpid());
  fflush(stdout);

  int sig = 0;
  sigwait(&stop, &sig);
  fprintf(stderr, "rsslab_agent: %s received, stopping servers\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  agent->StopAll(absl::Milliseconds(absl::GetFlag(FLAGS_stop_grace_ms)));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  agent.reset();
  fprintf(stderr, "rsslab_agent: stopped\n");
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(absl::StrCat(
      "rsslab_agent --listen=HOST:PORT --server_binary=PATH --profile_file=FILE [--log_dir=DIR] "
      "[--max_servers=N]\nLaunches rsslab_server under named allocator profiles over RPC "
      "(rsslab.v1.Agent) and verifies each launch in /proc.\nAllowed server flags in "
      "LaunchRequest.server_flags: ",
      AgentService::AllowedFlagsHelp()));
  ParseFlags(argc, argv);
  InstallRateLimitedProtobufLog("rsslab_agent");
  CheckNumbers();
  // Credentials before anything is created (--log_dir below).
  absl::StatusOr<Security> security = Security::FromFlags();
  if (!security.ok()) Die(std::string(security.status().message()));
  AgentService::Options o;
  ServerAndProfiles(argc, argv, &o);
  const std::string dirs = HandlerDirs(&o);
  LogDir(&o);
  o.max_servers = absl::GetFlag(FLAGS_max_servers);
  o.log_max_bytes = int64_t{absl::GetFlag(FLAGS_log_max_mb)} << 20;
  // The log writer is this binary run again (RunLogWriterIfAsked in main):
  // /proc/self/exe names it even if the file was replaced since.
  o.log_writer_binary = "/proc/self/exe";
  o.ready_timeout = absl::Seconds(absl::GetFlag(FLAGS_ready_timeout_s));
  const HostPort hp = Listen(*security, &o);
  const int state_lock = StateDir(hp, &o);

  // Stop signals only through sigwait; blocked before gRPC starts its
  // threads so they inherit the mask. Children get a clean mask (Spawn).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const int rc = Serve(o, *security, hp, dirs, stop);
  if (state_lock >= 0) close(state_lock);
  return rc;
}

}  // namespace
}  // namespace rsslab

int main(int argc, char** argv) {
  // A launched program's log writer (agent/log_cap.h), before any flag.
  int rc = 0;
  if (rsslab::launch::RunLogWriterIfAsked(argc, argv, &rc)) return rc;
  return rsslab::Main(argc, argv);
}
