// Two hosts on one machine: network namespaces A and B joined by a veth
// pair (10.231.0.1/30 in A, 10.231.0.2/30 in B; the addresses exist only
// inside those namespaces). The agent (and so the server it launches) runs
// in A, listening on A's address; rsslab_agent_ctl and the loadgen run in
// B and complete --builtin=quick over the veth. Needs root and `ip netns`;
// skipped with the reason otherwise. The namespaces are deleted whatever
// happens (deleting a namespace kills nothing, so the processes are
// stopped first, by pid).

#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/profiles.h"
#include "agent/output_pump.h"
#include "agent/spawn.h"
#include "gtest/gtest.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;

constexpr const char* kIp = "/usr/sbin/ip";
constexpr const char* kAddrA = "10.231.0.1";
constexpr const char* kAddrB = "10.231.0.2";

ServerProcess::Result Ip(const std::vector<std::string>& args) {
  return ServerProcess::Run(kIp, args, {}, absl::Seconds(10));
}

// Creates the namespaces and the link; deletes them in the destructor.
class Namespaces {
 public:
  Namespaces()
      : a_(absl::StrCat("rsslab-a-", getpid())),
        b_(absl::StrCat("rsslab-b-", getpid())),
        veth_a_(absl::StrCat("rsa", getpid() % 1000000)),
        veth_b_(absl::StrCat("rsb", getpid() % 1000000)) {}
  ~Namespaces() {
    if (created_a_) Ip({"netns", "del", a_});
    if (created_b_) Ip({"netns", "del", b_});
  }

  // Empty on success, else why it could not be done.
  std::string Create() {
    ServerProcess::Result r = Ip({"netns", "add", a_});
    if (r.exit_code != 0) return "ip netns add: " + r.err;
    created_a_ = true;
    r = Ip({"netns", "add", b_});
    if (r.exit_code != 0) return "ip netns add: " + r.err;
    created_b_ = true;
    const std::vector<std::vector<std::string>> steps = {
        {"link", "add", veth_a_, "netns", a_, "type", "veth", "peer", "name", veth_b_, "netns",
         b_},
        {"-n", a_, "addr", "add", absl::StrCat(kAddrA, "/30"), "dev", veth_a_},
        {"-n", b_, "addr", "add", absl::StrCat(kAddrB, "/30"), "dev", veth_b_},
        {"-n", a_, "link", "set", "lo", "up"},
        {"-n", b_, "link", "set", "lo", "up"},
        {"-n", a_, "link", "set", veth_a_, "up"},
        {"-n", b_, "link", "set", veth_b_, "up"},
    };
    for (const auto& s : steps) {
      r = Ip(s);
      if (r.exit_code != 0) return absl::StrCat("ip ", absl::StrJoin(s, " "), ": ", r.err);
    }
    return "";
  }
  // argv prefix running a command inside a namespace.
  std::vector<std::string> In(const std::string& ns, const std::string& binary) const {
    return {"netns", "exec", ns, binary};
  }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  const std::string a_, b_, veth_a_, veth_b_;
  bool created_a_ = false, created_b_ = false;
};

// `ip netns exec A rsslab_agent ...` (ip execs the agent: same pid).
class Agent {
 public:
  ~Agent() { Kill(); }
  std::string Start(const Namespaces& ns, const std::string& log_dir,
                    const std::string& token_file) {
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return "pipe";
    launch::SpawnOptions so;
    so.binary = kIp;
    so.args = ns.In(ns.a(), ServerProcess::Runfile("agent/rsslab_agent"));
    for (const std::string& a :
         {absl::StrCat("--listen=", kAddrA, ":50060"), absl::StrCat("--server_host=", kAddrA),
          "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
          "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
          "--log_dir=" + log_dir, std::string("--max_servers=2"),
          // Its own state dir: the default for a fixed port is under the
          // shared /tmp, where concurrent runs of this test would collide.
          "--state_dir=" + log_dir + "-state",
          // Listening beyond loopback needs protection (a token); the agent
          // hands the same token to the servers it starts.
          "--auth_token_file=" + token_file}) {
      so.args.push_back(a);
    }
    so.env = profiles::EnvStrings(profiles::CurrentEnviron());
    so.stdout_fd = out[1];
    absl::StatusOr<pid_t> pid = launch::Spawn(so);
    close(out[1]);
    if (!pid.ok()) return std::string(pid.status().message());
    pid_ = *pid;
    pump_ = std::make_unique<launch::OutputPump>(
        out[0], 2, false, launch::LineMatch::Prefix("rsslab_agent ready "), false);
    launch::OutputPump::Result r = pump_->WaitReady(absl::Seconds(30));
    if (r.state != launch::OutputPump::kReady) return "agent did not print its ready line";
    return "";
  }
  int Terminate() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  std::unique_ptr<launch::OutputPump> pump_;
};

std::string Field(const std::string& line, const std::string& key) {
  for (absl::string_view f : absl::StrSplit(absl::StripAsciiWhitespace(line), ' ')) {
    if (absl::ConsumePrefix(&f, key + "=")) return std::string(f);
  }
  return "";
}

// Listening TCP sockets in a namespace, as "addr:port" (from ss).
std::vector<std::string> Listeners(const std::string& ns) {
  ServerProcess::Result r = Ip({"netns", "exec", ns, "ss", "-ltnH"});
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(r.out, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> cols = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (cols.size() >= 4) out.emplace_back(cols[3]);
  }
  return out;
}

TEST(TwoHostsTest, AgentInOneNamespaceLoadgenInTheOther) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces (ip netns)";
  Namespaces ns;
  std::string err = ns.Create();
  if (!err.empty() && absl::StrContains(err, "ip netns add")) {
    GTEST_SKIP() << "ip netns is not permitted here: " << err;
  }
  ASSERT_EQ(err, "");

  const std::string tmp = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  const std::string token_file = tmp + "/token";
  {
    std::ofstream t(token_file);
    t << "two-hosts-test-" << getpid() << "\n";
  }
  chmod(token_file.c_str(), 0600);  // token files must be private
  const std::string token_flag = "--auth_token_file=" + token_file;
  Agent agent;
  ASSERT_EQ(agent.Start(ns, tmp + "/agent-logs", token_file), "");

  // Host B asks host A's agent for a server.
  std::vector<std::string> client = ns.In(ns.b(), ServerProcess::Runfile("agent/rsslab_agent_ctl"));
  client.push_back(absl::StrCat("--agent=", kAddrA, ":50060"));
  client.push_back(token_flag);
  std::vector<std::string> launch = client;
  launch.insert(launch.end(), {"launch", "glibc", "2"});
  ServerProcess::Result l = ServerProcess::Run(kIp, launch, {}, absl::Seconds(90));
  ASSERT_EQ(l.exit_code, 0) << l.err;
  const std::string id = Field(l.out, "id");
  const std::string data = Field(l.out, "data");
  const std::string control = Field(l.out, "control");
  EXPECT_TRUE(absl::StartsWith(data, absl::StrCat(kAddrA, ":"))) << l.out;
  EXPECT_TRUE(absl::StartsWith(control, absl::StrCat(kAddrA, ":"))) << l.out;

  // Nothing in A listens beyond loopback and A's own veth address; nothing
  // of ours listens in the test's own namespace.
  // (gRPC listens on IPv4-mapped IPv6 sockets: [::ffff:10.231.0.1]:PORT.)
  std::vector<std::string> listeners = Listeners(ns.a());
  for (std::string& addr : listeners) {
    absl::StrReplaceAll({{"[::ffff:", ""}, {"]:", ":"}}, &addr);
    EXPECT_TRUE(absl::StartsWith(addr, absl::StrCat(kAddrA, ":")) ||
                absl::StartsWith(addr, "127.") || absl::StartsWith(addr, "[::1"))
        << "listening on " << addr << " in namespace A";
  }
  EXPECT_TRUE(absl::c_linear_search(listeners, absl::StrCat(kAddrA, ":50060")))
      << absl::StrJoin(listeners, " ");
  EXPECT_TRUE(absl::c_linear_search(listeners, data)) << absl::StrJoin(listeners, " ");

  // Host B runs the quick scenario over the veth.
  std::vector<std::string> loadgen = ns.In(ns.b(), ServerProcess::Runfile("loadgen/rsslab_loadgen"));
  loadgen.insert(loadgen.end(), {"--builtin=quick", "--target=" + data, "--control=" + control,
                                 "--progress=none", "--out=" + tmp + "/run", token_flag});
  ServerProcess::Result g = ServerProcess::Run(kIp, loadgen, {}, absl::Seconds(120));
  EXPECT_EQ(g.exit_code, 0) << g.err;
  std::ifstream events(tmp + "/run/events.jsonl");
  std::stringstream all;
  all << events.rdbuf();
  EXPECT_TRUE(absl::StrContains(all.str(), "\"load\"")) << all.str().substr(0, 500);
  EXPECT_TRUE(absl::StrContains(all.str(), data));

  std::vector<std::string> stop = client;
  stop.insert(stop.end(), {"stop", id});
  ServerProcess::Result s = ServerProcess::Run(kIp, stop, {}, absl::Seconds(30));
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(agent.Terminate(), 0);
}

}  // namespace
}  // namespace rsslab
