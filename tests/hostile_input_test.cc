// Hostile and careless input to every binary: every file flag
// refuses /dev/zero and a FIFO with one line; every numeric flag refuses
// edge values (0, -1, max+1, overflow, NaN, garbage) with exit 2 before
// anything is created or sent; every numeric or string RPC field refuses
// edge values with INVALID_ARGUMENT and the server keeps serving; a resumed
// run must measure the same server.

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }
std::string Bin(const std::string& p) { return ServerProcess::Runfile(p); }
bool Exists(const std::string& p) { return access(p.c_str(), F_OK) == 0; }

std::vector<std::string> ServerBase() {
  return {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
          "--handler=" + Bin("tests/handlers/test_handler.py")};
}

struct Binary {
  std::string path;
  std::vector<std::string> base;  // the flag under test comes last and wins
  std::string created;            // must not exist afterwards ("" = none)
};

std::map<std::string, Binary> Binaries(const std::string& tag) {
  const std::string out = Tmp() + "/run-" + tag;
  const std::string logs = Tmp() + "/agent-logs-" + tag;
  return {
      {"server", {Bin("server/rsslab_server"), ServerBase(), ""}},
      {"ctl", {Bin("ctl/rsslab_ctl"), {"--control=127.0.0.1:1", "snapshot"}, ""}},
      {"agent",
       {Bin("agent/rsslab_agent"),
        {"--listen=127.0.0.1:0", "--server_binary=" + Bin("server/rsslab_server"),
         "--profile_file=" + Bin("agent/profiles.textproto"), "--log_dir=" + logs, "--state_dir=none"},
        logs}},
      {"loadgen",
       {Bin("loadgen/rsslab_loadgen"),
        {"--builtin=quick", "--target=127.0.0.1:1", "--control=127.0.0.1:1", "--out=" + out,
         "--connect_timeout=100ms", "--progress=none"},
        out}},
  };
}

// ---------------------------------------------------------------- files

TEST(HostileInputTest, EveryFileFlagRefusesDevicesAndFifos) {
  const std::string fifo = Tmp() + "/fifo";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> file_flags = {
      {"server", "auth_token_file"}, {"server", "tls_ca"},     {"server", "handler"},
      {"ctl", "auth_token_file"},    {"ctl", "tls_ca"},        {"agent", "profile_file"},
      {"agent", "auth_token_file"},  {"loadgen", "scenario"},  {"loadgen", "auth_token_file"},
      {"loadgen", "tls_ca"},
  };
  int n = 0;
  for (const std::string& bad : {std::string("/dev/zero"), fifo, Tmp()}) {
    for (const auto& [bin, flag] : file_flags) {
      Binary b = Binaries(absl::StrCat("f", n++))[bin];
      std::vector<std::string> args = b.base;
      if (flag == "scenario") args.erase(args.begin());  // instead of --builtin
      args.push_back(absl::StrCat("--", flag, "=", bad));
      const absl::Time t0 = absl::Now();
      ServerProcess::Result r = ServerProcess::Run(b.path, args, {}, absl::Seconds(20));
      EXPECT_EQ(r.exit_code, 2) << bin << " --" << flag << "=" << bad << ": " << r.err;
      EXPECT_TRUE(absl::StrContains(r.err, "not a regular file")) << bin << " --" << flag << ": " << r.err;
      EXPECT_LT(absl::Now() - t0, absl::Seconds(10)) << bin << " --" << flag << "=" << bad;
      if (!b.created.empty()) {
        EXPECT_FALSE(Exists(b.created)) << b.created;
      }
    }
  }
  // `report DIR` and --resume read DIR/events.jsonl.
  const std::string dir = Tmp() + "/events-dev";
  mkdir(dir.c_str(), 0700);
  unlink((dir + "/events.jsonl").c_str());
  ASSERT_EQ(symlink("/dev/zero", (dir + "/events.jsonl").c_str()), 0);
  ServerProcess::Result rep = ServerProcess::Run(Bin("loadgen/rsslab_loadgen"), {"report", dir}, {},
                                                 absl::Seconds(20));
  EXPECT_NE(rep.exit_code, 0) << rep.err;
  EXPECT_NE(rep.exit_code, -1) << "report read /dev/zero until killed";
  EXPECT_TRUE(absl::StrContains(rep.err, "not a regular file")) << rep.err;
  // rsslab_run reads profiles through the same helper.
  ServerProcess::Result r = ServerProcess::Run(Bin("agent/rsslab_run"),
                                               {"--profile_file=/dev/zero", "--list_profiles"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "not a regular file")) << r.err;
}

// --profile_file is the agent's and rsslab_run's profiles file; their old
// --profiles keeps working with a deprecation line (the loadgen's --profiles
// is a list of names), and the two naming different files is refused.
TEST(HostileInputTest, OldProfilesSpellingWorksWithANoteAndMayNotContradict) {
  const std::string shipped = Bin("agent/profiles.textproto");
  ServerProcess::Result run = ServerProcess::Run(Bin("agent/rsslab_run"),
                                                 {"--profiles=" + shipped, "--list_profiles"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "--profiles=" + shipped + " is deprecated: use "
                                         "--profile_file=")) << run.err;
  EXPECT_TRUE(absl::StrContains(run.out, "glibc")) << run.out;
  ServerProcess::Result both = ServerProcess::Run(
      Bin("agent/rsslab_run"), {"--profile_file=" + shipped, "--profiles=/dev/null", "--list_profiles"});
  EXPECT_EQ(both.exit_code, 64) << both.err;  // rsslab_run's usage error (EX_USAGE)
  EXPECT_TRUE(absl::StrContains(both.err, "name different files")) << both.err;
  Binary agent = Binaries("old-spelling")["agent"];
  std::vector<std::string> args;
  for (const std::string& a : agent.base) {
    if (!absl::StartsWith(a, "--profile_file=")) args.push_back(a);
  }
  args.push_back("--profiles=/dev/zero");  // the old spelling reaches the same checks
  ServerProcess::Result a = ServerProcess::Run(agent.path, args, {}, absl::Seconds(20));
  EXPECT_EQ(a.exit_code, 2) << a.err;
  EXPECT_TRUE(absl::StrContains(a.err, "is deprecated: use --profile_file=")) << a.err;
  EXPECT_TRUE(absl::StrContains(a.err, "not a regular file")) << a.err;
  args.push_back("--profile_file=" + shipped);
  ServerProcess::Result c = ServerProcess::Run(agent.path, args, {}, absl::Seconds(20));
  EXPECT_EQ(c.exit_code, 2) << c.err;
  EXPECT_TRUE(absl::StrContains(c.err, "name different files")) << c.err;
  EXPECT_FALSE(Exists(agent.created)) << agent.created;
}

TEST(HostileInputTest, TokenFilesReadableByOthersAreRefused) {
  const std::string token = Tmp() + "/open-token";
  FILE* f = fopen(token.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("0123456789abcdef0123456789abcdef\n", f);
  fclose(f);
  ASSERT_EQ(chmod(token.c_str(), 0644), 0);
  for (const auto& [name, b] : Binaries("tok")) {
    std::vector<std::string> args = b.base;
    args.push_back("--auth_token_file=" + token);
    ServerProcess::Result r = ServerProcess::Run(b.path, args);
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "chmod 600")) << name << ": " << r.err;
  }
}

// The TLS private key is a secret like the token; the certificate and the
// CA beside it are public (0644 here) and must still be accepted.
TEST(HostileInputTest, TlsKeyFilesReadableByOthersAreRefused) {
  auto write = [](const std::string& name, mode_t mode) {
    const std::string path = Tmp() + "/" + name;
    FILE* f = fopen(path.c_str(), "w");
    EXPECT_NE(f, nullptr) << path;
    if (f != nullptr) {
      fputs("-----BEGIN PLACEHOLDER-----\n", f);  // refused before it is parsed
      fclose(f);
    }
    EXPECT_EQ(chmod(path.c_str(), mode), 0) << path;
    return path;
  };
  const std::string cert = write("open-cert.pem", 0644);
  const std::string ca = write("open-ca.pem", 0644);
  const std::string key = write("open-key.pem", 0640);
  for (const auto& [name, b] : Binaries("tlskey")) {
    std::vector<std::string> args = b.base;
    args.insert(args.end(), {"--tls_cert=" + cert, "--tls_key=" + key, "--tls_ca=" + ca});
    ServerProcess::Result r = ServerProcess::Run(b.path, args);
    EXPECT_EQ(r.exit_code, 2) << name << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "--tls_key: " + key)) << name << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "chmod 600 " + key)) << name << ": " << r.err;
    EXPECT_FALSE(absl::StrContains(r.out, "ready")) << name << ": " << r.out;
    if (!b.created.empty()) {
      EXPECT_FALSE(Exists(b.created)) << b.created;
    }
  }
}

// ---------------------------------------------------------------- numbers

TEST(HostileInputTest, EveryNumericFlagRefusesEdgeValuesWithExit2AndCreatesNothing) {
  const std::string i64max = std::to_string(std::numeric_limits<int64_t>::max());
  const std::vector<std::string> garbage = {"abc", "99999999999999999999999", "1e999999", ""};
  struct Case {
    std::string bin, flag;
    std::vector<std::string> bad;
  };
  const std::vector<Case> cases = {
      {"server", "threads", {"0", "-1", "4097", i64max}},
      {"server", "cache_limit_mb", {"-1", "17592186044516", i64max}},
      {"server", "max_cache_limit_mb", {"-1", "17592186044516", i64max}},
      {"server", "churn_every", {"0", "-1"}},
      {"server", "churn_overlap_ms", {"-1", "3600001"}},
      {"server", "stuck_after_ms", {"0", "-1"}},
      {"server", "max_message_mb", {"0", "-1", "1025", i64max}},
      {"server", "max_watch_streams", {"-1", "1025"}},
      {"server", "auto_trim_gap_mb", {"-1", i64max}},
      {"server", "auto_trim_settle_ms", {"-1", "3600001"}},
      {"server", "auto_trim_settle_fraction", {"-0.1", "1", "nan", "inf"}},
      {"server", "auto_trim_interval_s", {"0", "-1", "604801"}},
      {"server", "auto_trim_min_spacing_s", {"-1", "604801"}},
      {"server", "shutdown_grace_ms", {"-1", "3600001"}},
      {"server", "handler_budget_ms", {"-1", "3600001"}},
      {"ctl", "cache_limit_mb", {"-2", "17592186044516", i64max}},
      {"ctl", "count", {"-1", "1073741825"}},
      {"ctl", "interval", {"0s", "-1s", "25h", "inf"}},
      {"ctl", "timeout", {"0s", "-1s", "25h", "inf"}},
      {"agent", "max_servers", {"0", "-1", "257"}},
      {"agent", "ready_timeout_s", {"0", "-1", "3601"}},
      {"agent", "stop_grace_ms", {"-1", "600001"}},
      {"loadgen", "scale", {"-1", "1e7", "nan", "inf"}},
      {"loadgen", "concurrency", {"-1", "100001"}},
      {"loadgen", "channels", {"-1", "100000", "1025"}},
      {"loadgen", "rate", {"-1", "1e12", "nan", "inf"}},
      {"loadgen", "max_outstanding", {"-1", "1000001"}},
      {"loadgen", "requests", {"-1", "1099511627777"}},
      {"loadgen", "duration", {"-1s", "721h", "inf"}},
      {"loadgen", "warmup", {"-1s", "721h"}},
      {"loadgen", "warmup_requests", {"-1", "1099511627777"}},
      {"loadgen", "deadline_ms", {"-1", "3600001"}},
      {"loadgen", "payload_bytes", {"-1", "16777217", "4000000000"}},
      {"loadgen", "client_threads", {"-1", "1025"}},
      {"loadgen", "connect_timeout", {"0s", "-1s", "2h"}},
      {"loadgen", "control_timeout", {"0s", "25h"}},
      {"loadgen", "repeats", {"-1", "1001"}},
      {"loadgen", "metrics_hold", {"-1s", "25h"}},
      {"loadgen", "stream_messages", {"-1", "1000001"}},
      {"loadgen", "stream_interval", {"-1s", "61s", "inf"}},
  };
  // A few random out-of-range values per flag too: fixed seed, so a failure
  // is reproducible.
  std::mt19937_64 rng(14);
  int n = 0;
  for (const Case& c : cases) {
    std::vector<std::string> values = c.bad;
    values.insert(values.end(), garbage.begin(), garbage.end());
    values.push_back(absl::StrCat("-", 1 + rng() % 1000000000));
    for (const std::string& v : values) {
      Binary b = Binaries(absl::StrCat("n", n++))[c.bin];
      std::vector<std::string> args = b.base;
      args.push_back(absl::StrCat("--", c.flag, "=", v));
      ServerProcess::Result r = ServerProcess::Run(b.path, args, {}, absl::Seconds(20));
      EXPECT_EQ(r.exit_code, 2) << c.bin << " --" << c.flag << "=" << v << ": " << r.err;
      EXPECT_TRUE(absl::StrContains(r.err, c.flag)) << c.bin << " --" << c.flag << "=" << v << ": "
                                                    << r.err;
      EXPECT_FALSE(absl::StrContains(r.out, "ready")) << c.bin << " --" << c.flag << "=" << v;
      if (!b.created.empty()) {
        EXPECT_FALSE(Exists(b.created)) << c.bin << " --" << c.flag << "=" << v;
      }
    }
  }
  // rsslab_run parses its own flags (usage errors exit 64 there, as before).
  for (const char* v : {"0", "-1", "3601", "abc"}) {
    ServerProcess::Result r =
        ServerProcess::Run(Bin("agent/rsslab_run"), {"--profile=glibc", absl::StrCat("--ready_timeout_s=", v)},
                           {}, absl::Seconds(20));
    EXPECT_EQ(r.exit_code, 64) << v << ": " << r.err;
  }
}

TEST(HostileInputTest, ScenarioNumbersAreBoundedToo) {
  const std::string path = Tmp() + "/huge.txtpb";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("name: \"huge\"\n"
        "step { set_phase { phase: \"fill\" cache_limit_mb: 17592186044516 } }\n"
        "step { load { requests: 10 payload_bytes: 4000000000 } }\n"
        "step { load { duration_s: 1 rate: 1e12 channels: 100000 } }\n"
        "step { wait { seconds: 1e300 } }\n",
        f);
  fclose(f);
  const std::string out = Tmp() + "/run-scenario";
  ServerProcess::Result r = ServerProcess::Run(
      Bin("loadgen/rsslab_loadgen"),
      {"--scenario=" + path, "--target=127.0.0.1:1", "--control=127.0.0.1:1", "--out=" + out});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  for (const char* what : {"cache_limit_mb", "payload_bytes", "rate", "channels", "wait seconds"}) {
    EXPECT_TRUE(absl::StrContains(r.err, what)) << what << ": " << r.err;
  }
  EXPECT_FALSE(Exists(out));
}

// ---------------------------------------------------------------- RPCs

class RpcFields : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ServerProcess::Start(ServerProcess::TestServer({"--threads=2", "--max_cache_limit_mb=1024"}));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    control_ = rsslab::v1::Control::NewStub(
        grpc::CreateChannel(server_->control_address(), grpc::InsecureChannelCredentials()));
    load_ = rsslab::v1::Load::NewStub(
        grpc::CreateChannel(server_->data_address(), grpc::InsecureChannelCredentials()));
  }
  void ExpectServing() {
    ASSERT_TRUE(server_->Running()) << server_->Stderr();
    grpc::ClientContext ctx;
    rsslab::v1::Snapshot snap;
    ASSERT_TRUE(control_->GetSnapshot(&ctx, rsslab::v1::SnapshotRequest(), &snap).ok());
    EXPECT_EQ(snap.cache().cache_limit_bytes(), 100 << 20) << "an edge value changed the limit";
    EXPECT_TRUE(Handle({}).ok());
  }
  grpc::Status SetPhase(const rsslab::v1::SetPhaseRequest& req) {
    grpc::ClientContext ctx;
    rsslab::v1::SetPhaseResponse resp;
    return control_->SetPhase(&ctx, req, &resp);
  }
  grpc::Status Handle(const std::map<std::string, std::string>& params) {
    rsslab::v1::HandleRequest req;
    for (const auto& [k, v] : params) (*req.mutable_params())[k] = v;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    rsslab::v1::HandleResponse resp;
    return load_->Handle(&ctx, req, &resp);
  }
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<rsslab::v1::Control::Stub> control_;
  std::unique_ptr<rsslab::v1::Load::Stub> load_;
};

TEST_F(RpcFields, EdgeValuesAreInvalidArgumentAndTheServerKeepsServing) {
  {
    rsslab::v1::SetPhaseRequest fill;
    fill.set_phase("fill");
    ASSERT_TRUE(SetPhase(fill).ok());
  }
  for (int64_t bytes : {int64_t{-1}, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max(), (int64_t{1024} << 20) + 1}) {
    rsslab::v1::SetPhaseRequest req;
    req.set_phase("fill");
    req.set_cache_limit_bytes(bytes);
    grpc::Status st = SetPhase(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bytes;
    EXPECT_TRUE(absl::StrContains(st.error_message(), "between 0 and 1073741824")) << st.error_message();
  }
  {
    rsslab::v1::SetPhaseRequest req;
    req.set_phase(std::string(3 << 20, 'p'));
    grpc::Status st = SetPhase(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message().size();
    EXPECT_LT(st.error_message().size(), 400u);
  }
  for (int mode : {99, -1, 4}) {  // 3 is TRIM_FREE_BLOCK_PURGE, valid
    rsslab::v1::SetPhaseRequest req;
    req.set_phase("trim");
    req.set_trim_mode(static_cast<rsslab::v1::TrimMode>(mode));
    EXPECT_EQ(SetPhase(req).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << mode;
    grpc::ClientContext ctx;
    rsslab::v1::TrimRequest treq;
    treq.set_mode(static_cast<rsslab::v1::TrimMode>(mode));
    rsslab::v1::TrimResponse tresp;
    EXPECT_EQ(control_->Trim(&ctx, treq, &tresp).error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << mode;
  }
  for (int64_t ms : {int64_t{1}, int64_t{9}, int64_t{-1}, int64_t{86400001},
                     std::numeric_limits<int64_t>::max()}) {
    grpc::ClientContext ctx;
    rsslab::v1::WatchRequest req;
    req.set_interval_ms(ms);
    auto reader = control_->WatchSnapshots(&ctx, req);
    rsslab::v1::Snapshot snap;
    EXPECT_FALSE(reader->Read(&snap)) << ms;
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT) << ms;
  }
  // Params: too many, too long, a 3 MB value (never echoed back whole).
  std::map<std::string, std::string> many;
  for (int i = 0; i < 65; ++i) many[absl::StrCat("k", i)] = "v";
  const std::vector<std::map<std::string, std::string>> bad_params = {
      many, {{std::string(200, 'k'), "v"}}, {{"k", std::string(3 << 20, 'v')}}};
  for (const auto& p : bad_params) {
    grpc::Status st = Handle(p);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_LT(st.error_message().size(), 400u);
  }
  ExpectServing();
}

// proto3 refuses a string that is not UTF-8 when parsing; gRPC's own
// handler then answers UNIMPLEMENTED with an empty message. The server
// parses Handle's bytes itself and says what is wrong.
TEST_F(RpcFields, NonUtf8ParamKeysAreInvalidArgumentWithAMessage) {
  // Built by hand: the C++ API would refuse to serialize it. HandleRequest
  // field 4 is params (map<string,string>): entry {1: key, 2: value}.
  rsslab::v1::HandleRequest probe;
  (*probe.mutable_params())["k"] = "v";
  std::string wire = probe.SerializeAsString();
  ASSERT_NE(wire.find("k"), std::string::npos);
  wire[wire.find('k')] = '\xff';
  grpc::GenericStub stub(grpc::CreateChannel(server_->data_address(), grpc::InsecureChannelCredentials()));
  grpc::Status st;
  // Many of them: neither the answers nor the server's log may grow with them.
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::Slice slice(wire);
    grpc::ByteBuffer req(&slice, 1), resp;
    absl::Notification done;
    stub.UnaryCall(&ctx, "/rsslab.v1.Load/Handle", grpc::StubOptions(), &req, &resp,
                   [&](grpc::Status s) {
                     st = s;
                     done.Notify();
                   });
    done.WaitForNotification();
  }
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "UTF-8")) << st.error_message();
  ExpectServing();
  EXPECT_LT(server_->Stderr().size(), 2000u) << server_->Stderr();
  // rsslab_ctl pointed at the data port says so plainly.
  ServerProcess::Result r = ServerProcess::Run(
      Bin("ctl/rsslab_ctl"), {"--control=" + server_->data_address(), "snapshot"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "does not serve rsslab's Control service")) << r.err;
}

// SetPhaseRequest.phase is the one string a Control request carries.
TEST_F(RpcFields, NonUtf8PhaseIsInvalidArgumentWithAMessage) {
  rsslab::v1::SetPhaseRequest probe;
  probe.set_phase("fill");
  std::string wire = probe.SerializeAsString();
  ASSERT_NE(wire.find('f'), std::string::npos);
  wire[wire.find('f')] = '\xff';  // by hand: the C++ API would refuse to serialize it
  grpc::GenericStub stub(
      grpc::CreateChannel(server_->control_address(), grpc::InsecureChannelCredentials()));
  auto call = [&](const std::string& method, const std::string& bytes) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer req(&slice, 1), resp;
    grpc::Status st;
    absl::Notification done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
      st = s;
      done.Notify();
    });
    done.WaitForNotification();
    return st;
  };
  grpc::Status st;
  // Many of them: neither the answers nor the server's log may grow with them.
  for (int i = 0; i < 50; ++i) st = call("/rsslab.v1.Control/SetPhase", wire);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "UTF-8")) << st.error_message();
  EXPECT_TRUE(absl::StrContains(st.error_message(), "SetPhaseRequest")) << st.error_message();
  // The same method still answers a well-formed request.
  probe.set_phase("idle");
  EXPECT_TRUE(call("/rsslab.v1.Control/SetPhase", probe.SerializeAsString()).ok());
  probe.set_phase("fill");
  EXPECT_TRUE(call("/rsslab.v1.Control/SetPhase", probe.SerializeAsString()).ok());
  ExpectServing();
  EXPECT_LT(server_->Stderr().size(), 2000u) << server_->Stderr();
}

// ---------------------------------------------------------------- resume

TEST(HostileInputTest, ResumeMustMeasureTheSameServer) {
  const std::string lg = Bin("loadgen/rsslab_loadgen");
  for (const bool sweep : {false, true}) {
    const std::string out = Tmp() + (sweep ? "/resume-sweep" : "/resume-soak");
    std::vector<std::string> first =
        sweep ? std::vector<std::string>{"--builtin=sweep", "--agent=127.0.0.1:1", "--scale=0.001"}
              : std::vector<std::string>{"--builtin=soak", "--duration=2s", "--target=127.0.0.1:1",
                                         "--control=127.0.0.1:1"};
    for (const char* f : {"--connect_timeout=100ms", "--progress=none"}) first.push_back(f);
    first.push_back("--out=" + out);
    // Nothing listens there: the run fails, leaving a header to resume.
    ServerProcess::Result r = ServerProcess::Run(lg, first);
    ASSERT_NE(r.exit_code, 2) << r.err;
    ASSERT_TRUE(Exists(out + "/events.jsonl")) << r.err;
    for (const std::string& other :
         sweep ? std::vector<std::string>{"--agent=127.0.0.1:2"}
               : std::vector<std::string>{"--target=127.0.0.1:2", "--control=127.0.0.1:2"}) {
      std::vector<std::string> again = first;
      again.push_back(other);
      again.push_back("--resume");
      r = ServerProcess::Run(lg, again);
      EXPECT_EQ(r.exit_code, 2) << other << ": " << r.err;
      const std::string flag = other.substr(0, other.find('='));
      EXPECT_TRUE(absl::StrContains(r.err, flag + "=127.0.0.1:2 differs")) << r.err;
    }
    // The same command line is accepted (and fails again for want of a
    // server). Soak only: a sweep waits 10 s for its agent.
    if (!sweep) {
      std::vector<std::string> same = first;
      same.push_back("--resume");
      r = ServerProcess::Run(lg, same);
      EXPECT_NE(r.exit_code, 2) << r.err;
    }
  }
}

TEST(HostileInputTest, EmptyTargetIsAUsageError) {
  // Before: gRPC took "" for a DNS name, logged resolver errors and the run
  // failed only after --connect_timeout, with a run directory written.
  const std::string out = Tmp() + "/empty-target-run";
  ServerProcess::Result r = ServerProcess::Run(
      Bin("loadgen/rsslab_loadgen"),
      {"--target=", "--control=", "--requests=10", "--progress=none", "--out=" + out});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--target is empty")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "dns")) << r.err;
  EXPECT_NE(access(out.c_str(), F_OK), 0) << "a usage error wrote " << out;
}

}  // namespace
}  // namespace rsslab
