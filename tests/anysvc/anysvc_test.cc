// rsslab_loadgen against a user's own grpcio service (tests/anysvc/
// shop_service.py, its own shop.proto: a nested message, repeated fields, an
// enum), through --proto/--call/--data templates. Real parts: the service
// is a real Python process on a loopback port, the loadgen the real binary.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Every field kind the template reaches: {{seq}} bare and inside strings,
// random ints and strings, an enum by name, a nested message, repeated
// strings and repeated messages. shop_service.py checks each request.
constexpr char kData[] =
    R"({"id": {{seq}}, "customer": "user-{{seq}}-{{rand_str 6}}",
        "item": {"sku": "S{{rand_int 1 99}}", "qty": {{rand_int 1 9}}, "kind": "TOY"},
        "tags": ["fixed", "t{{seq}}"], "extra": [{"sku": "e"}, {"sku": "f", "kind": "BOOK"}]})";

class Shop {
 public:
  explicit Shop(const std::string& name) : stats_(Tmp(name + ".stats.json")) {
    ServerProcess::Options o;
    o.binary = "/usr/bin/python3";
    o.args = {ServerProcess::Runfile("tests/anysvc/shop_service.py"), "--port=0",
              "--stats_file=" + stats_};
    o.ready_prefix = "shop ready ";
    auto s = ServerProcess::Start(o);
    EXPECT_TRUE(s.ok()) << s.status();
    if (s.ok()) server_ = *std::move(s);
  }
  std::string address() const { return server_ ? server_->Field("data") : ""; }
  // Stops the service (SIGTERM: it writes its counts) and reads them.
  google::protobuf::Struct Stats() {
    EXPECT_EQ(server_->Stop(SIGTERM), 0);
    google::protobuf::Struct st;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(ReadFile(stats_), &st).ok())
        << ReadFile(stats_);
    return st;
  }

 private:
  std::string stats_;
  std::unique_ptr<ServerProcess> server_;
};

double Num(const google::protobuf::Struct& s, const std::string& k) {
  auto it = s.fields().find(k);
  return it == s.fields().end() ? -1 : it->second.number_value();
}

std::vector<std::string> CallArgs(const std::string& target, const std::string& out,
                                  std::vector<std::string> extra) {
  std::vector<std::string> a = {"--proto=" + ServerProcess::Runfile("tests/anysvc/shop.proto"),
                                "--target=" + target, "--out=" + out, "--progress=lines"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The run's first load summary (a copy: the events are read afresh).
std::optional<rsslab::v1::LoadSummary> LoadOf(const std::vector<rsslab::v1::Event>& events) {
  for (const auto& e : events) {
    if (e.has_load()) return e.load();
  }
  return std::nullopt;
}

TEST(AnyServiceTest, EveryRequestArrivesWithItsOwnSequenceNumber) {
  Shop shop("seq");
  ASSERT_FALSE(shop.address().empty());
  const std::string out = Tmp("seq-run");
  auto r = ServerProcess::Run(
      Loadgen(), CallArgs(shop.address(), out,
                          {"--call=shop.v1.Cart/Add", std::string("--data=") + kData,
                           "--requests=3000", "--warmup_requests=100", "--concurrency=16",
                           "--channels=4", "--metadata=x-team:blue", "--metadata=x-env:a,b"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const google::protobuf::Struct st = shop.Stats();
  // Warm-up and measured requests all reach the service, each once.
  EXPECT_EQ(Num(st, "count"), 3100);
  EXPECT_EQ(Num(st, "distinct"), 3100);
  EXPECT_EQ(Num(st, "duplicates"), 0);
  EXPECT_EQ(Num(st, "min_id"), 0);
  EXPECT_EQ(Num(st, "max_id"), 3099);
  EXPECT_EQ(Num(st, "well_formed"), 3100);  // nested, enum, repeated as templated
  // Both --metadata occurrences, the comma inside a value kept.
  const auto& md = st.fields().at("metadata").struct_value().fields();
  EXPECT_EQ(md.count("x-team=blue"), 1u);
  EXPECT_EQ(md.count("x-env=a,b"), 1u);
  if (md.count("x-team=blue") != 0) {
    EXPECT_EQ(md.at("x-team=blue").number_value(), 3100);
  }
  const auto load = LoadOf(Events(out));
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->call(), "shop.v1.Cart/Add");
  EXPECT_EQ(load->requests_ok(), 3000u);
  EXPECT_EQ(load->requests_failed(), 0u);
  EXPECT_EQ(load->status_counts().at("OK"), 3000u);
  EXPECT_GT(load->request_bytes(), 3000u * 40);
  EXPECT_GT(load->response_bytes(), 3000u * 4);  // a Receipt: id + "ok"
  EXPECT_EQ(load->latency().count(), 3000u);
}

TEST(AnyServiceTest, OpenLoopAndDataFileCycle) {
  Shop shop("open");
  ASSERT_FALSE(shop.address().empty());
  const std::string file = Tmp("orders.jsonl");
  std::ofstream(file) << "{\"id\": {{seq}}, \"customer\": \"a\"}\n\n{\"id\": {{seq}}, \"customer\": \"b\"}\n";
  auto r = ServerProcess::Run(
      Loadgen(), CallArgs(shop.address(), Tmp("open-run"),
                          {"--call=shop.v1.Cart/Add", "--data_file=" + file, "--rate=400",
                           "--duration=1s"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const google::protobuf::Struct st = shop.Stats();
  EXPECT_GT(Num(st, "count"), 300);
  EXPECT_EQ(Num(st, "duplicates"), 0);
  const auto load = LoadOf(Events(Tmp("open-run")));
  ASSERT_TRUE(load.has_value());
  EXPECT_EQ(load->mode(), "open");
}

TEST(AnyServiceTest, WrongFieldIsAUsageErrorBeforeAnythingIsSent) {
  Shop shop("wrong");
  ASSERT_FALSE(shop.address().empty());
  const std::string out = Tmp("wrong-run");
  for (const std::string data :
       {R"({"id": {{seq}}, "custmer": "x"})", R"({"item": {"qty": "many"}})",
        R"({"item": {"kind": "GAME"}})", R"({"customer": {{seq}}})"}) {
    auto r = ServerProcess::Run(Loadgen(),
                                CallArgs(shop.address(), out,
                                         {"--call=shop.v1.Cart/Add", "--data=" + data,
                                          "--requests=10"}));
    EXPECT_EQ(r.exit_code, 2) << data << "\n" << r.err;
    EXPECT_THAT(r.err, ::testing::AnyOf(HasSubstr("custmer"), HasSubstr("qty"), HasSubstr("GAME"),
                                      HasSubstr("field customer")))
        << r.err;
  }
  auto r = ServerProcess::Run(Loadgen(), CallArgs(shop.address(), out,
                                                  {"--call=shop.v1.Cart/Remove", "--requests=10"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("has no method Remove (methods: Add, Refund, Track, Bulk, Chat)"));
  EXPECT_EQ(Num(shop.Stats(), "count"), 0);  // nothing reached the service
  EXPECT_NE(access(out.c_str(), F_OK), 0);     // nor was a run directory made
}

TEST(AnyServiceTest, UnimplementedMethodCountsAsErrors) {
  Shop shop("unimpl");
  ASSERT_FALSE(shop.address().empty());
  const std::string out = Tmp("unimpl-run");
  auto r = ServerProcess::Run(
      Loadgen(), CallArgs(shop.address(), out,
                          {"--call=shop.v1.Cart/Refund", "--data={\"id\": {{seq}}}",
                           "--requests=50", "--concurrency=1", "--channels=1",
                           "--max_errors=100"}));
  const auto load = LoadOf(Events(out));
  ASSERT_TRUE(load.has_value()) << r.err;
  EXPECT_EQ(load->requests_ok(), 0u);
  EXPECT_EQ(load->requests_failed(), 50u);
  EXPECT_EQ(load->status_counts().at("UNIMPLEMENTED"), 50u);
  EXPECT_EQ(load->status_counts().count("OK"), 0u);
  // Under --max_errors the step itself completes; without it the run fails.
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto strict = ServerProcess::Run(
      Loadgen(), CallArgs(shop.address(), Tmp("unimpl-strict"),
                          {"--call=shop.v1.Cart/Refund", "--requests=10"}));
  EXPECT_EQ(strict.exit_code, 1);
  EXPECT_THAT(strict.err, HasSubstr("UNIMPLEMENTED"));
}

TEST(AnyServiceTest, WithoutControlSkipsPhaseStepsOnce) {
  Shop shop("phases");
  ASSERT_FALSE(shop.address().empty());
  const std::string scenario = Tmp("mixed.txtpb");
  // Two calls in one scenario, and steps that need a Control service.
  std::ofstream(scenario) << R"(
name: "mixed"
step { set_phase { phase: "fill" } }
step { name: "write" load { requests: 200 call: "shop.v1.Cart/Add" data: "{\"id\": {{seq}}}" } }
step { snapshot {} }
step { repeat { times: 2 step { wait { seconds: 0.1 } } step { trim {} } } }
step { name: "read" load { requests: 100 call: "shop.v1.Cart/Add" data: "{\"customer\": \"r{{seq}}\"}" } }
)";
  const std::string out = Tmp("phases-run");
  auto r = ServerProcess::Run(Loadgen(), CallArgs(shop.address(), out,
                                                  {"--scenario=" + scenario}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string line =
      "no --control (the service runs no rsslab Control): set_phase steps only label the "
      "records; skipping the snapshot and trim steps; the load and wait steps run";
  EXPECT_THAT(r.err, HasSubstr(line));
  EXPECT_EQ(r.err.find(line), r.err.rfind(line)) << "said more than once:\n" << r.err;
  EXPECT_EQ(Num(shop.Stats(), "count"), 300);
  int loads = 0;
  for (const auto& e : Events(out)) loads += e.has_load() ? 1 : 0;
  EXPECT_EQ(loads, 2);
}

// --control given explicitly, even as rsslab_server's default address, is
// used with --call: here a real rsslab_server whose Control listens there,
// called through its own load.proto as a user's service would be.
TEST(AnyServiceTest, ExplicitControlIsUsedWithCall) {
  // The test's own network namespace (block-network): 50052 is free.
  auto server = ServerProcess::Start(
      ServerProcess::TestServer({"--control_listen=127.0.0.1:50052"}));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_EQ((*server)->control_address(), "127.0.0.1:50052");
  const std::string scenario = Tmp("control.txtpb");
  std::ofstream(scenario) << R"(
name: "control"
step { set_phase { phase: "fill" } }
step { load { requests: 100 } }
step { name: "after_fill" snapshot {} }
)";
  const std::string out = Tmp("control-run");
  auto r = ServerProcess::Run(
      Loadgen(), {"--proto=" + ServerProcess::Runfile("proto/load.proto"),
                  "--call=rsslab.v1.Load/Handle", "--data={\"id\": {{seq}}}",
                  "--target=" + (*server)->data_address(), "--control=127.0.0.1:50052",
                  "--scenario=" + scenario, "--out=" + out, "--progress=lines"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("no --control")));
  int snapshots = 0;
  for (const auto& e : Events(out)) {
    if (!e.has_snapshot()) continue;
    ++snapshots;
    EXPECT_NE(e.snapshot().taken_from(), "proc");  // from inside, over Control
    EXPECT_EQ(e.snapshot().pid(), (*server)->pid());
  }
  EXPECT_EQ(snapshots, 1);
}

// A streamed method's counts (shop_service.py's "streams" object).
double StreamNum(const google::protobuf::Struct& s, const std::string& k) {
  auto it = s.fields().find("streams");
  return it == s.fields().end() ? -1 : Num(it->second.struct_value(), k);
}

// Server-, client- and bidi-streaming methods of the user's service, each
// through the generic stub with a template per message: every stream and
// every message counted exactly, on both sides, and each message carries its
// own index ({{msg}}) and --data_file line.
TEST(AnyServiceTest, StreamingCallsCountEveryStreamAndMessage) {
  Shop shop("streams");
  ASSERT_FALSE(shop.address().empty());
  const std::string file = Tmp("chat.jsonl");
  std::ofstream(file) << "{\"id\": {{seq}}, \"item\": {\"qty\": {{msg}}}, \"customer\": \"a\"}\n"
                      << "{\"id\": {{seq}}, \"item\": {\"qty\": {{msg}}}, \"customer\": \"b\"}\n";
  struct Case {
    std::string name;
    std::vector<std::string> args;
    uint64_t sent, received, message_latencies;
  };
  const std::vector<Case> cases = {
      {"track", {"--call=shop.v1.Cart/Track", R"(--data={"id": {{seq}}, "item": {"qty": 3}})"},
       200, 600, 600},
      {"bulk",
       {"--call=shop.v1.Cart/Bulk", "--stream_messages=5",
        R"(--data={"id": {{seq}}, "item": {"qty": {{msg}}}})"},
       1000, 200, 1000},
      {"chat", {"--call=shop.v1.Cart/Chat", "--stream_messages=4", "--data_file=" + file},
       800, 800, 800},
  };
  for (const Case& c : cases) {
    const std::string out = Tmp(c.name + "-run");
    std::vector<std::string> args = c.args;
    for (const char* a : {"--requests=200", "--concurrency=8", "--channels=2"}) args.push_back(a);
    auto r = ServerProcess::Run(Loadgen(), CallArgs(shop.address(), out, args));
    ASSERT_EQ(r.exit_code, 0) << c.name << ": " << r.err;
    const auto load = LoadOf(Events(out));
    ASSERT_TRUE(load.has_value()) << c.name;
    EXPECT_TRUE(load->streaming()) << c.name;
    EXPECT_EQ(load->requests_ok(), 200u) << c.name;
    EXPECT_EQ(load->status_counts().at("OK"), 200u) << c.name;
    EXPECT_EQ(load->latency().count(), 200u) << c.name;  // one per stream
    EXPECT_EQ(load->messages_sent(), c.sent) << c.name;
    EXPECT_EQ(load->messages_received(), c.received) << c.name;
    EXPECT_EQ(load->message_latency().count(), c.message_latencies) << c.name;
    EXPECT_GT(load->messages_per_s(), 0) << c.name;
  }
  const google::protobuf::Struct st = shop.Stats();
  EXPECT_EQ(StreamNum(st, "track_calls"), 200);
  EXPECT_EQ(StreamNum(st, "track_pairs"), 200);  // one order per stream, each its own id
  EXPECT_EQ(StreamNum(st, "bulk_calls"), 200);
  EXPECT_EQ(StreamNum(st, "bulk_messages"), 1000);
  EXPECT_EQ(StreamNum(st, "bulk_pairs"), 1000);  // (stream, message index) all distinct
  EXPECT_EQ(StreamNum(st, "chat_calls"), 200);
  EXPECT_EQ(StreamNum(st, "chat_messages"), 800);
  EXPECT_EQ(StreamNum(st, "chat_pairs"), 800);
  EXPECT_EQ(StreamNum(st, "chat_in_turn"), 800);  // line k % 2 for message k
}

// A bidi stream the service aborts midway counts once, under its code (not
// once per message), the replies before the abort still counted; an open
// loop in streams per second, and the pause between messages, hold too.
TEST(AnyServiceTest, AbortedStreamCountsOnceAndOpenLoopInStreams) {
  Shop shop("abort");
  ASSERT_FALSE(shop.address().empty());
  const std::string out = Tmp("abort-run");
  auto r = ServerProcess::Run(
      Loadgen(),
      CallArgs(shop.address(), out,
               {"--call=shop.v1.Cart/Chat", "--stream_messages=4", "--requests=100",
                "--concurrency=4", "--channels=2", "--max_errors=1000",
                R"(--data={"id": {{seq}}, "item": {"qty": {{msg}}}, "tags": ["abort"]})"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto load = LoadOf(Events(out));
  ASSERT_TRUE(load.has_value());
  // Streams 0, 5, 10, ...: aborted at their third message.
  EXPECT_EQ(load->requests_failed(), 20u);
  EXPECT_EQ(load->status_counts().at("RESOURCE_EXHAUSTED"), 20u);
  EXPECT_EQ(load->status_counts().at("OK"), 80u);
  EXPECT_EQ(load->messages_received(), 80u * 4 + 20u * 2);
  EXPECT_THAT(load->first_error(), HasSubstr("out of stock"));

  const std::string open = Tmp("open-streams-run");
  auto o = ServerProcess::Run(
      Loadgen(), CallArgs(shop.address(), open,
                          {"--call=shop.v1.Cart/Chat", "--stream_messages=3",
                           "--stream_interval=20ms", "--rate=50", "--duration=1s",
                           R"(--data={"id": {{seq}}, "item": {"qty": {{msg}}}})"}));
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto ol = LoadOf(Events(open));
  ASSERT_TRUE(ol.has_value());
  EXPECT_EQ(ol->mode(), "open");
  EXPECT_EQ(ol->requests_ok() + ol->not_sent(), 50u);  // 50 streams per second for 1 s
  EXPECT_EQ(ol->messages_sent(), 3 * ol->requests_ok());
  // Two 20 ms pauses in every stream.
  EXPECT_GE(ol->latency().p50_us(), 40000);
  const google::protobuf::Struct st = shop.Stats();
  EXPECT_EQ(StreamNum(st, "chat_aborted"), 20);
  EXPECT_EQ(StreamNum(st, "chat_calls"), 100 + ol->requests_ok());
}

// The built-in server's HandleStream, called from its own load.proto as a
// user's method: every message runs the handler as a Handle call does (the
// server's own counters see each one, in its phase), and the idle phase's
// refusal ends each stream once, after one message.
TEST(AnyServiceTest, BuiltinHandleStreamRunsEachMessageThroughTheHandler) {
  auto server = ServerProcess::Start(ServerProcess::TestServer({}));
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string scenario = Tmp("stream.txtpb");
  std::ofstream(scenario) << R"(
name: "stream"
load_defaults { concurrency: 4 channels: 2 stream_messages: 5 }
step { set_phase { phase: "fill" } }
step { name: "streams" load { requests: 30 } }
step { name: "after_streams" snapshot {} }
step { set_phase { phase: "idle" } }
step { name: "refused" load { requests: 10 } }
step { name: "after_refused" snapshot {} }
)";
  const std::string out = Tmp("stream-run");
  auto r = ServerProcess::Run(
      Loadgen(), {"--proto=" + ServerProcess::Runfile("proto/load.proto"),
                  "--call=rsslab.v1.Load/HandleStream",
                  R"(--data={"id": {{seq}}, "seed": {{msg}}, "params": {"median": "64"}})",
                  "--target=" + (*server)->data_address(),
                  "--control=" + (*server)->control_address(), "--max_errors=100",
                  "--scenario=" + scenario, "--out=" + out, "--progress=lines"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, rsslab::v1::LoadSummary> loads;
  std::map<std::string, rsslab::v1::Snapshot> snaps;
  for (const auto& e : Events(out)) {
    if (e.has_load()) loads[e.load().step()] = e.load();
    if (e.has_snapshot()) snaps[e.label()] = e.snapshot();
  }
  ASSERT_EQ(loads.count("streams"), 1u);
  ASSERT_EQ(loads.count("refused"), 1u);
  const auto& ok = loads["streams"];
  EXPECT_EQ(ok.requests_ok(), 30u);
  EXPECT_EQ(ok.messages_sent(), 150u);
  EXPECT_EQ(ok.messages_received(), 150u);
  EXPECT_EQ(ok.message_latency().count(), 150u);
  const auto& refused = loads["refused"];
  EXPECT_EQ(refused.requests_failed(), 10u);
  EXPECT_EQ(refused.status_counts().at("FAILED_PRECONDITION"), 10u);
  EXPECT_EQ(refused.messages_received(), 0u);
  ASSERT_EQ(snaps.count("after_streams"), 1u) << r.err;
  ASSERT_EQ(snaps.count("after_refused"), 1u);
  EXPECT_EQ(snaps["after_streams"].requests_in_phase(), 150u);
  EXPECT_EQ(snaps["after_refused"].requests_refused() - snaps["after_streams"].requests_refused(),
            10u);
}

// With a token, HandleStream arrives on the generic service: the token is
// checked once per stream (a wrong one: UNAUTHENTICATED, once per stream),
// and the right one's streams are served in full.
TEST(AnyServiceTest, BuiltinHandleStreamChecksTheTokenPerStream) {
  const std::string token = Tmp("stream-token");
  std::ofstream(token) << "0123456789abcdef-stream-token\n";
  chmod(token.c_str(), 0600);
  auto server = ServerProcess::Start(ServerProcess::TestServer({"--auth_token_file=" + token}));
  ASSERT_TRUE(server.ok()) << server.status();
  for (const std::string bearer : {"0123456789abcdef-stream-token", "wrong-token"}) {
    const std::string out = Tmp("token-run-" + bearer);
    auto r = ServerProcess::Run(
        Loadgen(), {"--proto=" + ServerProcess::Runfile("proto/load.proto"),
                    "--call=rsslab.v1.Load/HandleStream", R"(--data={"id": {{seq}}})",
                    "--stream_messages=5", "--requests=40", "--concurrency=4", "--channels=2",
                    "--metadata=authorization:Bearer " + bearer, "--max_errors=100",
                    "--target=" + (*server)->data_address(), "--out=" + out, "--progress=none"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto load = LoadOf(Events(out));
    ASSERT_TRUE(load.has_value());
    if (bearer == "wrong-token") {
      EXPECT_EQ(load->status_counts().at("UNAUTHENTICATED"), 40u);
      EXPECT_EQ(load->messages_received(), 0u);
    } else {
      EXPECT_EQ(load->status_counts().at("OK"), 40u);
      EXPECT_EQ(load->messages_received(), 200u);
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace rsslab
