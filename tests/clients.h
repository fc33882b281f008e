// Load and Control stubs to one test server, with the calls most tests make.
//
//   auto server = ServerProcess::Start(ServerProcess::TestServer());
//   rsslab::testing::Clients c(server->get());
//   c.Phase("fill");
//   rsslab::v1::Snapshot s = c.Snapshot();
#ifndef RSSLAB_TESTS_CLIENTS_H_
#define RSSLAB_TESTS_CLIENTS_H_

#include <memory>
#include <string>

#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {

struct Clients {
  explicit Clients(ServerProcess* s);
  // SetPhase, failing the test if the call fails.
  void Phase(const std::string& phase, bool gc = true);
  // GetSnapshot (30 s deadline), failing the test if the call fails.
  rsslab::v1::Snapshot Snapshot();

  std::unique_ptr<rsslab::v1::Load::Stub> load;
  std::unique_ptr<rsslab::v1::Control::Stub> control;
};

}  // namespace testing
}  // namespace rsslab

#endif  // RSSLAB_TESTS_CLIENTS_H_
