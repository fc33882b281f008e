// ServerCore hands requests to the Python handler in arrival order, however
// many workers compete for the GIL (the seed's p99: a request bound to a worker
// before the GIL was taken could wait while later ones ran).

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
  int late = 0;       // requests that ran after a request that arrived later
  int most_late = 0;  // the most later requests that ran before one
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
    int position = -1;
    ASSERT_TRUE(absl::SimpleAtoi(responses[i].result().at("position"), &position)) << i;
    if (position != i) ++out_of_order;
    if (position > i) ++late;
    most_late = std::max(most_late, position - i);
  }
  const std::string what = absl::StrCat(out_of_order, " of ", kRequests,
                                        " requests ran out of arrival order (", late,
                                        " late); one ran after ", most_late, " later requests");
  // A worker picks the oldest request holding the GIL, but CPython may hand
  // the GIL over at the handler's first bytecode if the worker lost its core
  // for over the switch interval (5 ms) in between: that request then runs
  // after the ones the other workers pick meanwhile. Each such preemption
  // makes one request late (and shifts the ones that overtook it): one in
  // 2,000 in 1 of 4 runs here, two runs at a time on a loaded machine, and
  // likewise under ASan (docs/TESTING.md#sanitizers). The old dispatch
  // bound a request to each waiting worker before the GIL, and whichever
  // won ran its request: ~97 % out of order. Late requests are counted, not
  // those out of order: one request delayed past N others puts N + 1 out of
  // order (up to ~70 of 2,000 were at load 10-14).
  EXPECT_LE(late, kRequests / 100) << what;
  (*core)->Shutdown();
}

}  // namespace
}  // namespace rsslab
