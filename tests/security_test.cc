// Control-plane security against the real server: bearer token and TLS
// (mutual when a CA is given), and the refusal to listen beyond loopback
// unprotected. Runs in its own network namespace (block-network).

#include <sys/stat.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "grpcpp/grpcpp.h"
#include "proto/agent.grpc.pb.h"
#include "proto/control.grpc.pb.h"
#include "proto/load.grpc.pb.h"
#include "common/auth.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;

std::string Tmp() { return getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp"; }

// Private (0600), as token files must be.
std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = Tmp() + "/" + name;
  std::ofstream(path) << text;
  chmod(path.c_str(), 0600);
  return path;
}

void Sh(const std::string& cmd) {
  ASSERT_EQ(system((cmd + " >/dev/null 2>&1").c_str()), 0) << cmd;
}

// A CA, a server certificate for 127.0.0.1 and a client certificate signed
// by it, and a second ("rogue") CA with its own client certificate.
class Certs : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string d = Tmp();
    auto ca = [&](const std::string& n) {
      Sh(absl::StrCat("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=", n,
                      " -keyout ", d, "/", n, ".key -out ", d, "/", n, ".pem"));
    };
    auto leaf = [&](const std::string& n, const std::string& issuer, const std::string& ext) {
      Sh(absl::StrCat("openssl req -newkey rsa:2048 -nodes -subj /CN=", n, " -keyout ", d, "/", n,
                      ".key -out ", d, "/", n, ".csr"));
      std::string extfile = WriteFile(n + ".ext", ext);
      Sh(absl::StrCat("openssl x509 -req -days 2 -in ", d, "/", n, ".csr -CA ", d, "/", issuer,
                      ".pem -CAkey ", d, "/", issuer, ".key -CAcreateserial -out ", d, "/", n,
                      ".pem -extfile ", extfile));
    };
    ca("ca");
    ca("rogue-ca");
    leaf("server", "ca", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    leaf("client", "ca", "extendedKeyUsage=clientAuth\n");
    leaf("rogue-client", "rogue-ca", "extendedKeyUsage=clientAuth\n");
    // Private keys must be private (--tls_key refuses group/other bits),
    // whatever mode this openssl gives them.
    for (const char* n : {"ca", "rogue-ca", "server", "client", "rogue-client"}) {
      ASSERT_EQ(chmod(absl::StrCat(d, "/", n, ".key").c_str(), 0600), 0) << n;
    }
  }
};
const auto* kCerts = ::testing::AddGlobalTestEnvironment(new Certs);

std::string Pem(const std::string& n) { return Tmp() + "/" + n + ".pem"; }
std::string Key(const std::string& n) { return Tmp() + "/" + n + ".key"; }

const char kToken[] = "0123456789abcdef-right-token";

std::unique_ptr<ServerProcess> Start(std::vector<std::string> extra) {
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("server/rsslab_server");
  o.args = {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0", "--threads=1"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  auto s = ServerProcess::Start(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

grpc::Status SetPhase(const std::shared_ptr<grpc::Channel>& ch, const std::string& phase,
                      rsslab::v1::SetPhaseResponse* resp) {
  auto stub = rsslab::v1::Control::NewStub(ch);
  rsslab::v1::SetPhaseRequest req;
  req.set_phase(phase);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return stub->SetPhase(&ctx, req, resp);
}

grpc::Status Snapshot(const std::shared_ptr<grpc::Channel>& ch, rsslab::v1::Snapshot* snap) {
  auto stub = rsslab::v1::Control::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return stub->GetSnapshot(&ctx, rsslab::v1::SnapshotRequest(), snap);
}

std::shared_ptr<grpc::Channel> Client(SecurityOptions o, const std::string& target) {
  absl::StatusOr<Security> s = Security::Load(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s->Channel(target);
}

TEST(SecurityTest, TokenRequiredAndNothingChangesWithoutIt) {
  std::string token = WriteFile("token", std::string(kToken) + "\n");
  std::string wrong = WriteFile("wrong", "0123456789abcdef-wrong-token\n");
  auto server = Start({"--auth_token_file=" + token});
  ASSERT_NE(server, nullptr);
  const std::string target = server->control_address();
  rsslab::v1::SetPhaseResponse resp;

  grpc::Status none = SetPhase(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()),
                               "idle", &resp);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED) << none.error_message();
  SecurityOptions bad;
  bad.auth_token_file = wrong;
  grpc::Status wrong_status = SetPhase(Client(bad, target), "idle", &resp);
  EXPECT_EQ(wrong_status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  rsslab::v1::Snapshot snap;
  EXPECT_EQ(Snapshot(Client(bad, target), &snap).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  SecurityOptions good;
  good.auth_token_file = token;
  ASSERT_TRUE(Snapshot(Client(good, target), &snap).ok());
  EXPECT_EQ(snap.phase(), "start") << "an unauthenticated call changed the phase";
  EXPECT_TRUE(SetPhase(Client(good, target), "fill", &resp).ok());

  // The data plane checks the token too.
  auto load = rsslab::v1::Load::NewStub(
      grpc::CreateChannel(server->data_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  rsslab::v1::HandleResponse hr;
  EXPECT_EQ(load->Handle(&ctx, rsslab::v1::HandleRequest(), &hr).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto load_ok = rsslab::v1::Load::NewStub(Client(good, server->data_address()));
  grpc::ClientContext ctx2;
  EXPECT_TRUE(load_ok->Handle(&ctx2, rsslab::v1::HandleRequest(), &hr).ok());

  // rsslab_ctl sends the token from --auth_token_file.
  std::string ctl = ServerProcess::Runfile("ctl/rsslab_ctl");
  auto r = ServerProcess::Run(ctl, {"--control=" + target, "snapshot"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "UNAUTHENTICATED")) << r.err;
  r = ServerProcess::Run(ctl, {"--control=" + target, "--auth_token_file=" + token, "snapshot"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StrContains(r.out, "phase fill")) << r.out;
}

TEST(SecurityTest, MutualTlsAcceptsOnlyClientsSignedByTheCa) {
  auto server = Start({"--tls_cert=" + Pem("server"), "--tls_key=" + Key("server"),
                       "--tls_ca=" + Pem("ca")});
  ASSERT_NE(server, nullptr);
  const std::string target = server->control_address();
  rsslab::v1::Snapshot snap;

  SecurityOptions ok;
  ok.tls_ca = Pem("ca");
  ok.tls_cert = Pem("client");
  ok.tls_key = Key("client");
  EXPECT_TRUE(Snapshot(Client(ok, target), &snap).ok());

  SecurityOptions rogue = ok;
  rogue.tls_cert = Pem("rogue-client");
  rogue.tls_key = Key("rogue-client");
  EXPECT_FALSE(Snapshot(Client(rogue, target), &snap).ok()) << "rogue client cert accepted";

  SecurityOptions no_cert;
  no_cert.tls_ca = Pem("ca");
  EXPECT_FALSE(Snapshot(Client(no_cert, target), &snap).ok()) << "client without cert accepted";

  EXPECT_FALSE(Snapshot(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), &snap).ok())
      << "plaintext accepted by a TLS server";

  SecurityOptions wrong_ca = ok;
  wrong_ca.tls_ca = Pem("rogue-ca");
  EXPECT_FALSE(Snapshot(Client(wrong_ca, target), &snap).ok()) << "server cert not verified";
}

TEST(SecurityTest, NonLoopbackListenNeedsCredentials) {
  auto bin = ServerProcess::Runfile("server/rsslab_server");
  auto r = ServerProcess::Run(bin, {"--listen=0.0.0.0:0", "--control_listen=127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "refusing --listen=0.0.0.0:0")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--auth_token_file")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "ready"));
  r = ServerProcess::Run(bin, {"--listen=127.0.0.1:0", "--control_listen=0.0.0.0:0"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "refusing --control_listen")) << r.err;

  // With a token it starts (this test has its own network namespace, so
  // 0.0.0.0 reaches nothing but loopback).
  std::string token = WriteFile("token2", std::string(kToken) + "\n");
  auto ok = Start({"--control_listen=0.0.0.0:0", "--auth_token_file=" + token});
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->Stop(), 0);
  // --insecure_listen starts, loudly.
  auto loud = Start({"--control_listen=0.0.0.0:0", "--insecure_listen"});
  ASSERT_NE(loud, nullptr);
  EXPECT_EQ(loud->Stop(), 0);
  EXPECT_TRUE(absl::StrContains(loud->Stderr(), "WARNING")) << loud->Stderr();
}

TEST(SecurityTest, BadCredentialFilesAreOneLineErrors) {
  auto bin = ServerProcess::Runfile("server/rsslab_server");
  std::string shorty = WriteFile("short", "abc\n");
  auto r = ServerProcess::Run(bin, {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                                    "--auth_token_file=" + shorty});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "shorter than 16")) << r.err;
  r = ServerProcess::Run(bin, {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                               "--tls_cert=/nonexistent.pem", "--tls_key=/nonexistent.key"});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "/nonexistent.pem")) << r.err;
  r = ServerProcess::Run(bin, {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                               "--tls_cert=" + Pem("server")});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "go together")) << r.err;
  // A real key its group may read: refused before the server starts.
  std::ifstream in(Key("server"));
  std::string key_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string open_key = WriteFile("group-readable.key", key_text);
  ASSERT_EQ(chmod(open_key.c_str(), 0640), 0);
  r = ServerProcess::Run(bin, {"--listen=127.0.0.1:0", "--control_listen=127.0.0.1:0",
                               "--tls_cert=" + Pem("server"), "--tls_key=" + open_key});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_TRUE(absl::StrContains(r.err, "--tls_key: " + open_key)) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "chmod 600 " + open_key)) << r.err;
  EXPECT_FALSE(absl::StrContains(r.out, "ready")) << r.out;
}

TEST(SecurityTest, OversizedMessageIsRejectedNotACrash) {
  auto server = Start({"--max_message_mb=1"});
  ASSERT_NE(server, nullptr);
  auto load = rsslab::v1::Load::NewStub(
      grpc::CreateChannel(server->data_address(), grpc::InsecureChannelCredentials()));
  rsslab::v1::HandleRequest req;
  req.set_payload(std::string(2 << 20, 'x'));
  grpc::ClientContext ctx;
  rsslab::v1::HandleResponse resp;
  EXPECT_EQ(load->Handle(&ctx, req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  rsslab::v1::Snapshot snap;
  EXPECT_TRUE(Snapshot(grpc::CreateChannel(server->control_address(),
                                           grpc::InsecureChannelCredentials()), &snap).ok());
  EXPECT_EQ(server->Stop(), 0);
}


// The agent checks the token on every RPC, refuses unprotected non-loopback
// listening, and launches servers that require the same token.
TEST(SecurityTest, AgentRequiresTokenAndPassesItToItsServers) {
  std::string token = WriteFile("agent-token", std::string(kToken) + "\n");
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("agent/rsslab_agent");
  o.ready_prefix = "rsslab_agent ready ";
  const std::string server_bin = ServerProcess::Runfile("server/rsslab_server");
  const std::string profiles = ServerProcess::Runfile("agent/profiles.textproto");
  o.args = {"--listen=127.0.0.1:0", "--server_binary=" + server_bin, "--profile_file=" + profiles,
            "--log_dir=" + Tmp(), "--auth_token_file=" + token};
  auto agent_or = ServerProcess::Start(o);
  ASSERT_TRUE(agent_or.ok()) << agent_or.status();
  auto agent = std::move(*agent_or);
  const std::string addr = agent->Field("listen");
  ASSERT_FALSE(addr.empty());

  auto anon = rsslab::v1::Agent::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext c1;
  rsslab::v1::ListProfilesResponse profiles_resp;
  EXPECT_EQ(anon->ListProfiles(&c1, {}, &profiles_resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext c2;
  rsslab::v1::LaunchRequest launch;
  launch.set_profile("glibc");
  launch.set_threads(1);
  launch.set_handler("noop");
  rsslab::v1::LaunchResponse launched;
  EXPECT_EQ(anon->Launch(&c2, launch, &launched).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  SecurityOptions good;
  good.auth_token_file = token;
  auto stub = rsslab::v1::Agent::NewStub(Client(good, addr));
  grpc::ClientContext c3;
  rsslab::v1::ListResponse list;
  ASSERT_TRUE(stub->List(&c3, {}, &list).ok());
  EXPECT_EQ(list.servers_size(), 0) << "an unauthenticated Launch started a server";
  grpc::ClientContext c4;
  grpc::Status s = stub->Launch(&c4, launch, &launched);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const std::string control = launched.server().control_address();
  rsslab::v1::Snapshot snap;
  EXPECT_EQ(Snapshot(grpc::CreateChannel(control, grpc::InsecureChannelCredentials()), &snap)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED)
      << "the launched server does not require the agent's token";
  EXPECT_TRUE(Snapshot(Client(good, control), &snap).ok());
  EXPECT_EQ(agent->Stop(), 0);

  // Non-loopback without credentials is refused at start.
  auto r = ServerProcess::Run(o.binary, {"--listen=0.0.0.0:0", "--server_binary=" + server_bin,
                                         "--profile_file=" + profiles});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(r.err, "refusing --listen=0.0.0.0:0")) << r.err;
}

}  // namespace
}  // namespace rsslab
