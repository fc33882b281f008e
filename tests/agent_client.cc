// A minimal Agent client for tests that must call the agent from another
// network namespace (the gRPC client has to live where its sockets do):
//
//   agent_client --agent=10.231.0.1:50060 launch glibc 2
//     -> "id=ID data=HOST:PORT control=HOST:PORT pid=PID"
//   agent_client --agent=10.231.0.1:50060 stop ID
//     -> "exit=..."
//   agent_client --agent=10.231.0.1:50060 list
//     -> "id=ID pid=PID running=1 adopted=0 exit=" per server
// Credentials as every rsslab client: --auth_token_file, --tls_ca, ...
// Exit status 0 on success, 1 with the RPC error on stderr.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "grpcpp/grpcpp.h"
#include "proto/agent.grpc.pb.h"
#include "common/auth.h"

ABSL_FLAG(std::string, agent, "127.0.0.1:50060", "Agent address.");

int main(int argc, char** argv) {
  std::vector<char*> pos = absl::ParseCommandLine(argc, argv);
  absl::StatusOr<rsslab::Security> security = rsslab::Security::FromFlags();
  if (!security.ok()) {
    fprintf(stderr, "%s\n", std::string(security.status().message()).c_str());
    return 2;
  }
  auto stub = rsslab::v1::Agent::NewStub(security->Channel(absl::GetFlag(FLAGS_agent)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  ctx.set_wait_for_ready(true);  // the agent may be a moment from listening
  if (pos.size() == 4 && std::string(pos[1]) == "launch") {
    rsslab::v1::LaunchRequest req;
    req.set_profile(pos[2]);
    int threads = 0;
    if (!absl::SimpleAtoi(pos[3], &threads)) return 2;
    req.set_threads(threads);
    rsslab::v1::LaunchResponse resp;
    grpc::Status s = stub->Launch(&ctx, req, &resp);
    if (!s.ok()) {
      fprintf(stderr, "launch: %s\n", s.error_message().c_str());
      return 1;
    }
    printf("id=%s data=%s control=%s pid=%d\n", resp.server().id().c_str(),
           resp.server().data_address().c_str(), resp.server().control_address().c_str(),
           resp.server().pid());
    return 0;
  }
  if (pos.size() == 3 && std::string(pos[1]) == "stop") {
    rsslab::v1::StopRequest req;
    req.set_id(pos[2]);
    rsslab::v1::StopResponse resp;
    grpc::Status s = stub->Stop(&ctx, req, &resp);
    if (!s.ok()) {
      fprintf(stderr, "stop: %s\n", s.error_message().c_str());
      return 1;
    }
    printf("exit=%s\n", resp.server().exit().c_str());
    return 0;
  }
  if (pos.size() == 2 && std::string(pos[1]) == "list") {
    rsslab::v1::ListResponse resp;
    grpc::Status s = stub->List(&ctx, rsslab::v1::ListRequest(), &resp);
    if (!s.ok()) {
      fprintf(stderr, "list: %s\n", s.error_message().c_str());
      return 1;
    }
    for (const auto& p : resp.servers()) {
      printf("id=%s pid=%d running=%d adopted=%d exit=%s%s\n", p.id().c_str(), p.pid(),
             p.running(), p.adopted(), p.exit().c_str(),
             p.lost().empty() ? "" : (" lost=" + p.lost()).c_str());
    }
    return 0;
  }
  fprintf(stderr, "usage: agent_client --agent=H:P launch PROFILE THREADS | stop ID | list\n");
  return 2;
}
