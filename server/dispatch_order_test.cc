// ServerCore hands requests to the Python handler in arrival order, however
// many workers compete for the GIL (issue 7's seed p99: a request bound to a
// worker before the GIL was taken could wait while later ones ran).

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"
#include "proto/load.pb.h"
#include "server/core.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

TEST(DispatchOrderTest, RequestsReachTheHandlerInArrivalOrder) {
  constexpr int kRequests = 2000;
  ServerCore::Options options;
  options.threads = 8;
  options.handler_path = testing::ServerProcess::Runfile("tests/handlers/record_order.py");
  absl::StatusOr<std::unique_ptr<ServerCore>> core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();

  std::vector<rsslab::v1::HandleRequest> requests(kRequests);
  std::vector<rsslab::v1::HandleResponse> responses(kRequests);
  std::vector<absl::Status> statuses(kRequests);
  absl::BlockingCounter left(kRequests);
  // Submitted from one thread, so arrival order is index order.
  for (int i = 0; i < kRequests; ++i) {
    requests[i].set_id(i);
    // ~0.5 ms of pure Python under the GIL, like the seed handler.
    (*requests[i].mutable_params())["spin"] = "20000";
    (*core)->Submit(&requests[i], &responses[i], nullptr, [&, i](const absl::Status& s) {
      statuses[i] = s;
      left.DecrementCount();
    });
  }
  left.Wait();

  int out_of_order = 0;
  int most_late = 0;  // the most later requests that ran before one
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    int position = -1;
    ASSERT_TRUE(absl::SimpleAtoi(responses[i].result().at("position"), &position)) << i;
    if (position != i) ++out_of_order;
    most_late = std::max(most_late, position - i);
  }
  // Not zero: on a loaded machine the interpreter can hand the GIL to another
  // worker between the pick and the handler's first bytecode (its eval
  // breaker), so a few requests swap places (measured: up to ~70 of 2,000 at
  // load 10-14). The fault this guards against, binding a request to a
  // worker before the GIL is taken, lets the GIL's next owner (any of the 8
  // waiting workers) run first every time, not once in a while.
  EXPECT_LE(out_of_order, kRequests / 10) << out_of_order << " of " << kRequests
                             << " requests ran out of arrival order; one ran after "
                             << most_late << " later requests";
  (*core)->Shutdown();
}

}  // namespace
}  // namespace rsslab
