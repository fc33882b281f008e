// rsslab_agent_ctl: one-off calls to an rsslab_agent, from any host that
// can reach it (the loadgen's sweeps make the same calls themselves).
//
//   rsslab_agent_ctl --agent=10.0.0.1:50060 launch glibc 4
//     -> "id=ID data=HOST:PORT control=HOST:PORT pid=PID"
//   rsslab_agent_ctl --agent=10.0.0.1:50060 stop ID
//     -> "exit=..."
//   rsslab_agent_ctl --agent=10.0.0.1:50060 list
//     -> "id=ID pid=PID running=1 adopted=0 exit=" per server
// Credentials as every rsslab client: --auth_token_file, --tls_ca, ...
// Exit status 0 on success, 1 with the RPC error on stderr, 2 on bad usage.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/untrusted_text.h"
#include "common/flags_parse.h"
#include "grpcpp/grpcpp.h"
#include "proto/agent.grpc.pb.h"

ABSL_FLAG(std::string, agent, "127.0.0.1:50060", "Agent address HOST:PORT.");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(90),
          "Deadline for the call, waiting for the agent to be reachable included (a launch waits "
          "for the server's ready line and its verification).");

namespace {

constexpr char kUsage[] =
    "rsslab_agent_ctl [--agent=HOST:PORT] [--auth_token_file=F | --tls_*] COMMAND\n"
    "  launch PROFILE THREADS   start a verified server; prints id= data= control= pid=\n"
    "  stop ID                  stop it (SIGTERM); prints its exit\n"
    "  list                     the agent's servers, one a line";

int Failed(const char* what, const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    fprintf(stderr, "rsslab_agent_ctl: %s: no answer from the agent at %s within --timeout (%s)\n",
            what, rsslab::Echo(absl::GetFlag(FLAGS_agent)).c_str(),
            rsslab::Echo(s.error_message(), 1024).c_str());
    return 1;
  }
  fprintf(stderr, "rsslab_agent_ctl: %s: %s\n", what, rsslab::Echo(s.error_message(), 1024).c_str());
  return 1;
}

int Usage(const std::string& why) {
  fprintf(stderr, "rsslab_agent_ctl: %s; usage: launch PROFILE THREADS | stop ID | list\n",
          why.c_str());
  return 2;
}

// Checks the command and its arguments before anything is sent: 0, or 2
// after saying what is wrong.
int CheckCommand(const std::vector<char*>& pos, int* threads) {
  if (pos.size() < 2) return Usage("missing command");
  const std::string cmd = pos[1];
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  if (timeout < absl::Milliseconds(1) || timeout > absl::Hours(1)) {
    return Usage("--timeout must be between 1ms and 1h");
  }
  if (cmd == "launch") {
    if (pos.size() != 4) return Usage("launch takes PROFILE THREADS");
    if (!absl::SimpleAtoi(pos[3], threads) || *threads < 1) {
      return Usage("launch: THREADS '" + rsslab::Echo(pos[3], 32) + "' is not a positive number");
    }
  } else if (cmd == "stop") {
    if (pos.size() != 3) return Usage("stop takes ID");
  } else if (cmd == "list") {
    if (pos.size() != 2) return Usage("list takes no arguments");
  } else {
    return Usage("unknown command '" + rsslab::Echo(cmd, 64) + "'");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> pos = rsslab::ParseFlags(argc, argv);
  int threads = 0;
  if (int rc = CheckCommand(pos, &threads); rc != 0) return rc;
  const std::string cmd = pos[1];
  absl::StatusOr<rsslab::Security> security = rsslab::Security::FromFlags();
  if (!security.ok()) {
    fprintf(stderr, "rsslab_agent_ctl: %s\n", std::string(security.status().message()).c_str());
    return 2;
  }
  auto stub = rsslab::v1::Agent::NewStub(security->Channel(absl::GetFlag(FLAGS_agent)));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::GetFlag(FLAGS_timeout)));
  ctx.set_wait_for_ready(true);  // the agent may be a moment from listening
  if (cmd == "launch") {
    rsslab::v1::LaunchRequest req;
    req.set_profile(pos[2]);
    req.set_threads(threads);
    rsslab::v1::LaunchResponse resp;
    grpc::Status s = stub->Launch(&ctx, req, &resp);
    if (!s.ok()) return Failed("launch", s);
    printf("id=%s data=%s control=%s pid=%d\n", rsslab::Echo(resp.server().id()).c_str(),
           rsslab::Echo(resp.server().data_address()).c_str(),
           rsslab::Echo(resp.server().control_address()).c_str(), resp.server().pid());
    return 0;
  }
  if (cmd == "stop") {
    rsslab::v1::StopRequest req;
    req.set_id(pos[2]);
    rsslab::v1::StopResponse resp;
    grpc::Status s = stub->Stop(&ctx, req, &resp);
    if (!s.ok()) return Failed("stop", s);
    printf("exit=%s\n", rsslab::Echo(resp.server().exit()).c_str());
    return 0;
  }
  rsslab::v1::ListResponse resp;
  grpc::Status s = stub->List(&ctx, rsslab::v1::ListRequest(), &resp);
  if (!s.ok()) return Failed("list", s);
  for (const auto& p : resp.servers()) {
    printf("id=%s pid=%d running=%d adopted=%d exit=%s%s\n", rsslab::Echo(p.id()).c_str(), p.pid(),
           p.running(), p.adopted(), rsslab::Echo(p.exit()).c_str(),
           p.lost().empty() ? "" : (" lost=" + rsslab::Echo(p.lost())).c_str());
  }
  return 0;
}
