// Load and Control stubs to one test server, with the calls the integration
// tests make (every test drives servers through these, not its own stubs).
//
//   auto server = ServerProcess::Start(ServerProcess::TestServer());
//   rsslab::testing::Clients c(server->get());
//   c.Phase("fill");
//   ASSERT_EQ(c.Drive(/*n=*/1000, /*threads=*/4, /*seed0=*/1), 0);
//   rsslab::v1::Snapshot s = c.Snapshot();
#ifndef RSSLAB_TESTS_CLIENTS_H_
#define RSSLAB_TESTS_CLIENTS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {

using Params = std::map<std::string, std::string>;

struct Clients {
  explicit Clients(ServerProcess* s);
  Clients(const std::string& data_address, const std::string& control_address);

  // Load.Handle with a 30 s deadline.
  grpc::Status Handle(const rsslab::v1::HandleRequest& req, rsslab::v1::HandleResponse* resp);
  // A request with id = seed = `seed` and these params; `resp` may be null.
  grpc::Status Handle(uint64_t seed, const Params& params = {},
                      rsslab::v1::HandleResponse* resp = nullptr);
  // `n` requests (seeds seed0, seed0 + 1, ...) from `threads` client
  // threads; `params(i)` (optional) gives request i's params. Returns how
  // many failed.
  int Drive(int n, int threads, uint64_t seed0,
            const std::function<Params(int)>& params = nullptr);

  // SetPhase with a 60 s deadline; `limit` -1 leaves the limit unset.
  grpc::Status SetPhase(const std::string& phase, rsslab::v1::SetPhaseResponse* resp,
                        int64_t limit = -1, bool gc = true);
  // SetPhase, failing the test if the call fails.
  void Phase(const std::string& phase, bool gc = true);
  // GetSnapshot (30 s deadline), failing the test if the call fails.
  rsslab::v1::Snapshot Snapshot(bool gc = false);
  // Control.Trim (60 s deadline), failing the test if the call fails.
  rsslab::v1::TrimResult Trim(rsslab::v1::TrimMode mode, bool gc = false);

  std::unique_ptr<rsslab::v1::Load::Stub> load;
  std::unique_ptr<rsslab::v1::Control::Stub> control;
};

}  // namespace testing
}  // namespace rsslab

#endif  // RSSLAB_TESTS_CLIENTS_H_
