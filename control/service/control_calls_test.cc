#include "control/service/control_calls.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>  // NOLINT(build/c++11)

#include "absl/time/clock.h"
#include "common/phase.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

// Counts what it was asked; the rules under test are ControlCalls'. It
// checks nothing: a request that reaches it was checked before dispatch.
class CountingBackend : public ControlBackend {
 public:
  CacheCeiling cache_ceiling() const override { return {int64_t{1} << 30, "a test's 1 GiB"}; }
  absl::Status SetPhase(const SetPhaseCall& call, rsslab::v1::SetPhaseResponse* response,
                        absl::Duration python_deadline) override {
    last_deadline = python_deadline;
    dispatched.fetch_add(1);
    response->set_previous_phase("was-" + PhaseName(call.phase));
    return absl::OkStatus();
  }
  absl::Status Trim(const TrimCall& call, rsslab::v1::TrimResponse* response,
                    absl::Duration python_deadline) override {
    last_deadline = python_deadline;
    dispatched.fetch_add(1);
    response->mutable_after()->set_phase("trimmed");
    return absl::OkStatus();
  }
  void TakeSnapshot(const ControlSnapshotOptions& options, rsslab::v1::Snapshot* out) override {
    last_deadline = options.python_deadline;
    out->set_phase(options.gc ? "gc" : "nogc");
    snapshots.fetch_add(1);
  }
  std::atomic<int> snapshots{0};
  std::atomic<int> dispatched{0};
  absl::Duration last_deadline;
};

TEST(ControlCallsTest, SerializedCallsParseAnswerAndRefuse) {
  CountingBackend backend;
  ControlCalls calls(&backend, 2);
  rsslab::v1::SnapshotRequest req;
  req.set_gc(true);
  std::string out;
  ASSERT_TRUE(calls.CallSerialized("GetSnapshot", req.SerializeAsString(),
                                   absl::InfiniteFuture(), &out).ok());
  rsslab::v1::Snapshot snap;
  ASSERT_TRUE(snap.ParseFromString(out));
  EXPECT_EQ(snap.phase(), "gc");
  EXPECT_EQ(backend.last_deadline, absl::Seconds(2));  // no deadline: the cap

  // Half the caller's time left goes to Python.
  ASSERT_TRUE(calls.CallSerialized("GetSnapshot", "", absl::Now() + absl::Seconds(1), &out).ok());
  EXPECT_LE(backend.last_deadline, absl::Milliseconds(500));
  EXPECT_GE(backend.last_deadline, absl::Milliseconds(400));

  absl::Status bad = calls.CallSerialized("Trim", "\xff\xff\xff", absl::InfiniteFuture(), &out);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "the request does not parse as rsslab.v1.TrimRequest");
  absl::Status mode = calls.CallSerialized("Trim", "\x08\x07", absl::InfiniteFuture(), &out);
  EXPECT_EQ(mode.code(), absl::StatusCode::kInvalidArgument) << mode;
  // Checked before dispatch: the backend never saw the refused requests.
  rsslab::v1::SetPhaseRequest big;
  big.set_phase("fill");
  big.set_cache_limit_bytes(int64_t{2} << 30);
  absl::Status ceiling =
      calls.CallSerialized("SetPhase", big.SerializeAsString(), absl::InfiniteFuture(), &out);
  EXPECT_NE(ceiling.message().find("(the ceiling is a test's 1 GiB)"), absl::string_view::npos)
      << ceiling;
  EXPECT_EQ(backend.dispatched.load(), 0);
  absl::Status none = calls.CallSerialized("Reboot", "", absl::InfiniteFuture(), &out);
  EXPECT_EQ(none.code(), absl::StatusCode::kUnimplemented);

  rsslab::v1::SetPhaseRequest phase;
  phase.set_phase("fill");
  ASSERT_TRUE(calls.CallSerialized("SetPhase", phase.SerializeAsString(), absl::InfiniteFuture(),
                                   &out).ok());
  rsslab::v1::SetPhaseResponse answer;
  ASSERT_TRUE(answer.ParseFromString(out));
  EXPECT_EQ(answer.previous_phase(), "was-fill");
  // Not UTF-8 in a proto3 string: refused with the sentence that says so.
  absl::Status utf8 =
      calls.CallSerialized("SetPhase", std::string("\x0a\x02\xff\xfe", 4), absl::InfiniteFuture(), &out);
  EXPECT_EQ(utf8.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(utf8.message().find("not valid UTF-8"), absl::string_view::npos) << utf8;
}

TEST(ControlCallsTest, WatchBoundsCountsAndSlots) {
  CountingBackend backend;
  ControlCalls calls(&backend, 2);
  rsslab::v1::WatchRequest r;
  r.set_interval_ms(5);
  EXPECT_EQ(calls.OpenWatch(r).status().code(), absl::StatusCode::kInvalidArgument);
  r.set_interval_ms(int64_t{24} * 3600 * 1000 + 1);
  EXPECT_EQ(calls.OpenWatch(r).status().code(), absl::StatusCode::kInvalidArgument);

  r.set_interval_ms(10);
  r.set_max_count(3);
  auto w = calls.OpenWatch(r);
  ASSERT_TRUE(w.ok());
  rsslab::v1::Snapshot s;
  int n = 0;
  const absl::Time start = absl::Now();
  while ((*w)->Next(&s)) ++n;
  EXPECT_EQ(n, 3);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));  // two intervals between three

  r.set_max_count(0);
  r.set_interval_ms(60000);
  auto second = calls.OpenWatch(r);
  ASSERT_TRUE(second.ok());
  absl::Status full = calls.OpenWatch(r).status();  // w and second hold both slots
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("limit 2, --max_watch_streams)"), absl::string_view::npos)
      << full;
  w->reset();  // gives its slot back
  EXPECT_TRUE(calls.OpenWatch(r).ok());
}

TEST(ControlCallsTest, RefusalNamesWhatSetsTheLimit) {
  CountingBackend backend;
  ControlCalls calls(&backend, 0, "the package's fixed limit");
  rsslab::v1::WatchRequest r;
  absl::Status full = calls.OpenWatch(r).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "too many WatchSnapshots streams (limit 0, the package's fixed limit)");
}

TEST(ControlCallsTest, CancelAndStopEndAWaitingWatchPromptly) {
  CountingBackend backend;
  ControlCalls calls(&backend, 8);
  rsslab::v1::WatchRequest r;
  r.set_interval_ms(60000);
  auto w = calls.OpenWatch(r);
  ASSERT_TRUE(w.ok());
  rsslab::v1::Snapshot s;
  ASSERT_TRUE((*w)->Next(&s));  // the first is due at once
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    (*w)->Cancel();
  });
  const absl::Time start = absl::Now();
  EXPECT_FALSE((*w)->Next(&s));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  canceller.join();

  std::atomic<bool> gone{false};
  auto v = calls.OpenWatch(r);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE((*v)->Next(&s, [&] { return gone.load(); }));
  gone = true;
  EXPECT_FALSE((*v)->Next(&s, [&] { return gone.load(); }));

  auto u = calls.OpenWatch(r);
  ASSERT_TRUE(u.ok());
  calls.StopWatches();
  EXPECT_FALSE((*u)->Next(&s));
  EXPECT_EQ(backend.snapshots.load(), 2);
}

}  // namespace
}  // namespace rsslab
