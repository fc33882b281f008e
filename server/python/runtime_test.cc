// The embedded interpreter on its own: start, a handler call from an attached
// thread (Python runs only on attached threads), errors as statuses, the
// cache module, gc, info, finalize. One test:
// CPython can be initialized once per process.
#include "server/python/runtime.h"

#include <thread>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

TEST(PythonRuntime, RunsTheHandlerOnAnAttachedThreadAndFinalizesOnce) {
  PythonRuntime::Options o;
  o.handler_path = testing::ServerProcess::Runfile("tests/handlers/test_handler.py");
  o.default_params = {{"store", "1000"}};
  o.cache_limit_bytes = 1 << 20;
  absl::StatusOr<std::unique_ptr<PythonRuntime>> started = PythonRuntime::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  PythonRuntime& rt = **started;
  EXPECT_EQ(rt.cache().Counters().limit_bytes, 1 << 20);

  absl::Status ok_status, raised_status;
  v1::HandleResponse ok_response, raised_response;
  int64_t collected = -1;
  v1::PythonInfo info;
  std::thread worker([&] {
    rt.AttachThread();
    {
      PythonRuntime::Scope py;
      v1::HandleRequest req;
      req.set_id(7);
      req.set_seed(3);
      req.set_return_body(true);
      ok_status = rt.Handle(req, /*worker=*/0, &ok_response);  // store=1000 from the defaults
      (*req.mutable_params())["raise"] = "1";
      raised_status = rt.Handle(req, 0, &raised_response);
      collected = rt.Collect();
      rt.FillInfo(&info);
    }
    rt.DetachThread();
  });
  worker.join();

  ASSERT_TRUE(ok_status.ok()) << ok_status;
  EXPECT_EQ(ok_response.id(), 7u);
  EXPECT_EQ(ok_response.body_size(), 1000);
  EXPECT_EQ(ok_response.body().size(), 1000u);
  EXPECT_TRUE(ok_response.stored());
  EXPECT_EQ(rt.cache().Counters().entries, 1);
  EXPECT_GE(rt.cache().Counters().bytes, 1000);

  EXPECT_EQ(raised_status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(raised_status.message(), "ValueError: boom from test handler"))
      << raised_status;
  EXPECT_EQ(rt.handler_errors(), 1u);

  EXPECT_GE(collected, 0);
  EXPECT_TRUE(absl::StartsWith(info.version(), "3.")) << info.version();
  EXPECT_GT(info.allocated_blocks(), 0);
  rt.Finalize();  // on the thread that started it, every worker detached
}

}  // namespace
}  // namespace rsslab
