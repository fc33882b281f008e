// The user's own grpcio service (shop_service.py) launched by a real
// rsslab_agent through --allow_command under allocator profiles (real
// LD_PRELOAD, real /proc checks), read from outside (ProcSnapshot), and a
// 2-profile x 1-thread-count sweep over it through the real loadgen that
// merges into a complete table.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/agent.grpc.pb.h"
#include "agent/readiness.h"
#include "tests/loadgen_it/loadgen_testing.h"
#include "tests/server_process.h"

namespace rsslab {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kData[] = R"({"id": {{seq}}, "customer": "c{{rand_str 32}}", "tags": ["t{{seq}}"]})";

class AgentWithShop : public ::testing::Test {
 protected:
  void SetUp() override {
    // The shipped profiles and one whose allocator never loads.
    profiles_ = Tmp("profiles.textproto");
    std::ofstream(profiles_) << ReadFile(ServerProcess::Runfile("agent/profiles.textproto"))
                             << "\nprofile { name: \"never\" allocator: \"glibc\" "
                                "expect_mapped: \"libnever-mapped\" }\n";
    StartAgent({"--listen=127.0.0.1:0", "--state_dir=none", "--log_dir=" + Tmp("agent-logs"),
              "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
              "--handler_dirs=" + DirOf(ServerProcess::Runfile("server/handlers/web_worker.py")),
              "--profile_file=" + profiles_,
              "--allow_command=shop=" + ServerProcess::Runfile("tests/anysvc/shop_service.py"),
              // Repeated flag, the template with a space: both survive.
              "--allow_command_args=shop=--port={port} --threads={threads} --hold_kb=4",
              "--allow_command_ready=shop=^shop ready ",
              "--allow_command=other=/bin/true",
              "--allow_command_args=other=--port={port}",
              "--allow_command_ready=other=never printed",
              // Quoting: one template word per intended argument.
              "--allow_command=argv=" + Argv(), std::string("--allow_command_args=argv=") + kArgvTemplate,
              "--allow_command_ready=argv=^argv ready ",
              // A ready line's Control address: refused off loopback unless allowed.
              "--allow_command=ctlbad=" + Argv(),
              "--allow_command_args=ctlbad=--port={port} --control=10.9.9.9:1234",
              "--allow_command_ready=ctlbad=" + std::string(kArgvControl),
              "--allow_command=ctlok=" + Argv(),
              "--allow_command_args=ctlok=--port={port} --control=10.9.9.9:1234",
              "--allow_command_ready=ctlok=" + std::string(kArgvControl),
              "--allow_command_control=ctlok=10.9.9.9",
              // A plain grpcio service keeping Python's default SIGTERM
              // handling (no handler: SIGTERM kills it), and one that dies
              // by itself mid-sweep.
              "--allow_command=shopterm=" + ServerProcess::Runfile("tests/anysvc/shop_service.py"),
              "--allow_command_args=shopterm=--port={port} --threads={threads} --sigterm=default",
              "--allow_command_ready=shopterm=^shop ready ",
              "--allow_command=shopdies=" + ServerProcess::Runfile("tests/anysvc/shop_service.py"),
              "--allow_command_args=shopdies=--port={port} --sigterm=default "
              "--exit_after_requests=" + std::to_string(kDiesAt),
              "--allow_command_ready=shopdies=^shop ready "});
  }

  // The sweep's fill at --scale=0.005 is 480 requests: it dies in the shrink.
  static constexpr int kDiesAt = 500;
  static std::string Argv() { return ServerProcess::Runfile("tests/anysvc/argv_child.py"); }
  // Spaces, both quotes and their escapes, shell metacharacters quoted and
  // not, a placeholder kept literal in single quotes, an empty word.
  static constexpr char kArgvTemplate[] =
      R"(--port={port} --q='a b' "--dq=x \"y\" \\z \n" 'semi;colon' a;b '$(touch OUT)' )"
      R"("`touch OUT`" 'a|b' c|d '*' e* --lit='{port}' \$HOME "" back\ slash	tab --t={threads})";
  static constexpr char kArgvControl[] = R"(^argv ready control=(?P<control>\S+) )";

  // A real agent with `args`; its address and a stub to it.
  void StartAgent(const std::vector<std::string>& args) {
    ServerProcess::Options o;
    o.binary = ServerProcess::Runfile("agent/rsslab_agent");
    o.args = args;
    o.ready_prefix = "rsslab_agent ready ";
    auto a = ServerProcess::Start(o);
    ASSERT_TRUE(a.ok()) << a.status();
    agent_ = *std::move(a);
    address_ = agent_->Field("listen");
    stub_ = v1::Agent::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  }

  static std::string DirOf(const std::string& p) { return p.substr(0, p.rfind('/')); }

  grpc::Status Launch(const std::string& profile, const std::string& command,
                      v1::ServerProcess* out, const std::string& handler = "") {
    v1::LaunchRequest req;
    req.set_profile(profile);
    req.set_threads(2);
    req.set_command(command);
    req.set_handler(handler);
    v1::LaunchResponse resp;
    grpc::ClientContext cc;
    cc.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(90));
    grpc::Status s = stub_->Launch(&cc, req, &resp);
    *out = resp.server();
    return s;
  }
  grpc::Status Stop(const std::string& id, v1::ServerProcess* out) {
    v1::StopRequest req;
    req.set_id(id);
    v1::StopResponse resp;
    grpc::ClientContext cc;
    grpc::Status s = stub_->Stop(&cc, req, &resp);
    *out = resp.server();
    return s;
  }

  std::string profiles_;
  std::unique_ptr<ServerProcess> agent_;
  std::string address_;
  std::unique_ptr<v1::Agent::Stub> stub_;
};

TEST_F(AgentWithShop, LaunchesTheServiceUnderEachProfileVerified) {
  for (const std::string profile : {"glibc-arena2", "jemalloc"}) {
    v1::ServerProcess s;
    grpc::Status st = Launch(profile, "shop", &s);
    ASSERT_TRUE(st.ok()) << profile << ": " << st.error_message();
    EXPECT_EQ(s.command(), "shop");
    EXPECT_EQ(s.profile(), profile);
    EXPECT_TRUE(s.control_address().empty());  // the service runs no Control
    ASSERT_FALSE(s.data_address().empty());
    if (profile == "jemalloc") {
      EXPECT_THAT(s.mapped_library(), HasSubstr("libjemalloc"));
    } else {
      bool arena = false;
      for (const auto& e : s.verified_env()) {
        arena |= e.name() == "MALLOC_ARENA_MAX" && e.value() == "2";
      }
      EXPECT_TRUE(arena);
    }
    // It serves: the loadgen calls it at the address the agent reports.
    auto r = ServerProcess::Run(
        Loadgen(), {"--proto=" + ServerProcess::Runfile("tests/anysvc/shop.proto"),
                    "--call=shop.v1.Cart/Add", std::string("--data=") + kData,
                    "--target=" + s.data_address(), "--requests=200", "--concurrency=4",
                    "--channels=2", "--out=" + Tmp("direct-" + profile), "--progress=none"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // From outside: /proc/PID read by the agent.
    v1::ProcSnapshotRequest req;
    req.set_id(s.id());
    v1::Snapshot snap;
    grpc::ClientContext cc;
    ASSERT_TRUE(stub_->ProcSnapshot(&cc, req, &snap).ok());
    EXPECT_EQ(snap.taken_from(), "proc");
    EXPECT_EQ(snap.pid(), s.pid());
    EXPECT_GT(snap.status().rss_bytes(), 5 << 20);  // a Python process holding 200 x 4 KiB
    EXPECT_EQ(snap.allocator(), profile == "jemalloc" ? "jemalloc" : "glibc");
    v1::ServerProcess stopped;
    ASSERT_TRUE(Stop(s.id(), &stopped).ok());
    EXPECT_EQ(stopped.exit_code(), 0);  // the service's own SIGTERM handling
  }
}

TEST_F(AgentWithShop, RefusesWhatItWasNotGiven) {
  v1::ServerProcess s;
  grpc::Status st = Launch("jemalloc", "/usr/bin/python3", &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(st.error_message(),
              HasSubstr("--allow_command: argv, ctlbad, ctlok, other, shop, shopdies, shopterm"));
  st = Launch("jemalloc", "shop", &s, "web_worker");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The allocator did not load: refused, naming the profile; killed.
  st = Launch("never", "shop", &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("profile 'never' did not take effect"));
  // A program that exits at once.
  st = Launch("glibc", "other", &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ABORTED) << st.error_message();
}

// Swept under two profiles, a service that dies of the sweep's SIGTERM
// (Python's default) is stopped normally: both cells count.
TEST_F(AgentWithShop, SweepOverTheServiceMergesIntoACompleteTable) {
  const std::string out = Tmp("sweep");
  auto r = ServerProcess::Run(
      Loadgen(),
      {"--builtin=sweep", "--command=shopterm", "--agent=" + address_,
       "--profiles=glibc-arena2,jemalloc", "--threads_list=2", "--repeats=1", "--scale=0.005",
       "--wait=1s", "--proto=" + ServerProcess::Runfile("tests/anysvc/shop.proto"), "--call=shop.v1.Cart/Add",
       std::string("--data=") + kData, "--concurrency=4", "--channels=2", "--out=" + out,
       "--progress=lines"},
      {}, absl::Seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("set_phase steps only label the records; snapshot steps read "
                               "/proc/PID from outside; the load and wait steps run"));
  // Both cells, each with memory read from outside after fill and shrink.
  int cells = 0, proc_snapshots = 0;
  for (const auto& e : Events(out)) {
    if (e.has_cell_result()) {
      ++cells;
      EXPECT_TRUE(e.cell_result().ok()) << e.cell_result().ShortDebugString();
      EXPECT_EQ(e.cell_result().server().command(), "shopterm");
      EXPECT_EQ(e.cell_result().server().term_signal(), SIGTERM);
      EXPECT_FALSE(e.cell_result().server().ended_before_stop());
    }
    if (e.has_snapshot() && e.snapshot().taken_from() == "proc") ++proc_snapshots;
  }
  EXPECT_EQ(cells, 2);
  EXPECT_GE(proc_snapshots, 2 * 3);  // after_fill, after_shrink, after_idle per cell
  auto m = ServerProcess::Run(Loadgen(), {"merge", "--out=" + Tmp("merged"), out});
  EXPECT_EQ(m.exit_code, 0) << m.out << m.err;
  EXPECT_THAT(m.out, HasSubstr("2 of 2 cells ok"));
  // Read from /proc, the service reports no cache: the fill check is off,
  // not "never filled".
  EXPECT_THAT(m.out, Not(HasSubstr("NEVER")));
  EXPECT_THAT(m.out, HasSubstr(" off "));
  EXPECT_THAT(m.out, HasSubstr("glibc-arena2"));
  EXPECT_THAT(m.out, HasSubstr("jemalloc"));
}

// JSON of a list of ASCII strings, as Python's json.dumps writes it.
std::string JsonList(const std::vector<std::string>& v) {
  std::vector<std::string> out;
  for (const std::string& w : v) {
    out.push_back(absl::StrCat("\"", absl::StrReplaceAll(w, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\""));
  }
  return absl::StrCat("[", absl::StrJoin(out, ", "), "]");
}

TEST_F(AgentWithShop, TemplateWordsArriveAsExactlyTheIntendedArgv) {
  v1::ServerProcess s;
  grpc::Status st = Launch("glibc", "argv", &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const std::string port = s.data_address().substr(s.data_address().rfind(':') + 1);
  const std::vector<std::string> want = {
      "--port=" + port, "--q=a b", R"(--dq=x "y" \z \n)", "semi;colon", "a;b", "$(touch OUT)",
      "`touch OUT`", "a|b", "c|d", "*", "e*", "--lit={port}", "$HOME", "", "back slash", "tab",
      "--t=2"};
  std::string line;
  for (absl::string_view l : absl::StrSplit(ReadFile(s.log_path()), '\n')) {
    if (absl::StartsWith(l, "argv ready ")) line = std::string(l);
  }
  EXPECT_EQ(line, "argv ready control=- " + JsonList(want)) << ReadFile(s.log_path());
  v1::ServerProcess stopped;
  ASSERT_TRUE(Stop(s.id(), &stopped).ok());
  EXPECT_EQ(stopped.term_signal(), SIGTERM);  // Python's default: no handler
  // No shell ran: nothing made OUT in the directory the agent and its
  // program run in (this test's).
  EXPECT_NE(access("OUT", F_OK), 0);
}

TEST_F(AgentWithShop, ReadyLineControlAddressOnlyOnLoopbackOrWhereAllowed) {
  v1::ServerProcess s;
  grpc::Status st = Launch("glibc", "ctlbad", &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  EXPECT_THAT(st.error_message(),
              HasSubstr("command ctlbad: its ready line's Control address '10.9.9.9:1234' is "
                        "neither on loopback nor one --allow_command_control=ctlbad=... allows "
                        "(none given); stopped it (pid "));
  EXPECT_EQ(st.error_message().find('\n'), std::string::npos);
  // Stopped: nothing of it runs.
  v1::ListRequest lr;
  v1::ListResponse listed;
  grpc::ClientContext cc;
  ASSERT_TRUE(stub_->List(&cc, lr, &listed).ok());
  ASSERT_EQ(listed.servers_size(), 1);
  EXPECT_FALSE(listed.servers(0).running());
  EXPECT_NE(kill(listed.servers(0).pid(), 0), 0);
  // The same line where the operator said to expect it.
  st = Launch("glibc", "ctlok", &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(s.control_address(), "10.9.9.9:1234");
  v1::ServerProcess stopped;
  ASSERT_TRUE(Stop(s.id(), &stopped).ok());
}

// A service that dies before the sweep stops it: the cell is lost, but the
// steps it measured stay in the run directory and the table marks the cell.
TEST_F(AgentWithShop, ServiceThatDiesBeforeStopKeepsItsMeasuredSteps) {
  const std::string out = Tmp("sweep-dies");
  auto r = ServerProcess::Run(
      Loadgen(),
      {"--builtin=sweep", "--command=shopdies", "--agent=" + address_, "--profiles=glibc",
       "--threads_list=2", "--repeats=1", "--scale=0.005", "--wait=1s",
       "--proto=" + ServerProcess::Runfile("tests/anysvc/shop.proto"), "--call=shop.v1.Cart/Add",
       std::string("--data=") + kData, "--concurrency=4", "--channels=2", "--out=" + out,
       "--progress=lines"},
      {}, absl::Seconds(300));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  v1::CellResult cell;
  int fill_loads = 0, proc_snapshots = 0;
  for (const auto& e : Events(out)) {
    if (e.has_cell_result()) cell = e.cell_result();
    if (e.has_load() && e.loadgen_phase() == "fill") fill_loads += e.load().requests_ok() > 0;
    if (e.has_snapshot() && e.snapshot().taken_from() == "proc") ++proc_snapshots;
  }
  EXPECT_FALSE(cell.ok());
  EXPECT_TRUE(cell.died_before_stop()) << cell.ShortDebugString();
  EXPECT_EQ(cell.failed_at(), "died");
  EXPECT_TRUE(cell.server().ended_before_stop());
  EXPECT_EQ(cell.server().exit_code(), 3);
  EXPECT_GT(cell.steps_done(), 0);
  EXPECT_LT(cell.steps_done(), cell.steps_total());
  const std::string mark = absl::StrCat("died before stop after ", cell.steps_done(), " of ",
                                        cell.steps_total(), " steps");
  EXPECT_THAT(cell.error(), HasSubstr(mark + " (server exited 3)"));
  // What was measured before it died: the fill's load and its snapshot.
  EXPECT_EQ(fill_loads, 1);
  EXPECT_GE(proc_snapshots, 1);
  EXPECT_THAT(r.out + r.err, HasSubstr("glibc/t2/r1: " + mark));
  EXPECT_THAT(ReadFile(out + "/summary.md"), HasSubstr("| glibc/t2/r1 | **" + mark + "** |"));
}

// rsslab_run --command: one's own program once under a profile, verified,
// its PID and addresses printed, stopped by Ctrl-C (SIGINT to rsslab_run).
TEST(RunCommand, LaunchesVerifiesPrintsItsPidAndStopsOnSigint) {
  ServerProcess::Options o;
  o.binary = ServerProcess::Runfile("agent/rsslab_run");
  o.args = {"--profile=glibc-arena2", "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
            "--command=argv", "--threads=3",
            "--allow_command=argv=" + ServerProcess::Runfile("tests/anysvc/argv_child.py"),
            "--allow_command_args=argv=--port={port} --q='a b' --t={threads}",
            "--allow_command_ready=argv=^argv ready "};
  o.ready_prefix = "rsslab_run ready ";
  auto run = ServerProcess::Start(o);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ((*run)->Field("command"), "argv");
  EXPECT_EQ((*run)->Field("profile"), "glibc-arena2");
  EXPECT_THAT((*run)->Field("data"), HasSubstr("127.0.0.1:"));
  const int pid = std::stoi((*run)->Field("pid"));
  ASSERT_GT(pid, 0);
  EXPECT_NE(pid, (*run)->pid());  // the program, not rsslab_run
  // The profile reached it: /proc/PID/environ, and its argv as templated.
  const std::string environ = ReadFile(absl::StrCat("/proc/", pid, "/environ"));
  EXPECT_THAT(environ, HasSubstr(std::string("MALLOC_ARENA_MAX=2\0", 19)));
  EXPECT_THAT(ReadFile(absl::StrCat("/proc/", pid, "/cmdline")),
              HasSubstr(std::string("--q=a b\0--t=3", 14)));
  EXPECT_THAT((*run)->Stderr(), HasSubstr("profile 'glibc-arena2' verified in pid " +
                                          std::to_string(pid)));
  // Ctrl-C: SIGTERM to the program (Python's default kills it), a normal stop.
  EXPECT_EQ((*run)->Stop(SIGINT, absl::Seconds(30)), 0) << (*run)->Stderr();
  EXPECT_THAT((*run)->Stderr(), HasSubstr(absl::StrCat("command argv (pid ", pid,
                                                       ") stopped: killed by SIGTERM, a normal stop")));
  EXPECT_NE(kill(pid, 0), 0);  // gone
}

TEST(RunCommand, BadArgumentsAreOneLineUsageErrors) {
  const std::string run = ServerProcess::Runfile("agent/rsslab_run");
  const std::string profiles = "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto");
  const std::string allow = "--allow_command=argv=" + ServerProcess::Runfile("tests/anysvc/argv_child.py");
  struct Case {
    std::vector<std::string> args;
    std::string why;
  } cases[] = {
      {{"--profile=glibc", profiles, "--command=nope", allow, "--allow_command_args=argv=--port={port}"},
       "command 'nope' is not one rsslab_run was started with (--allow_command: argv)"},
      {{"--profile=glibc", profiles, "--command=argv", allow, "--allow_command_args=argv=--port={port}",
        "--port=1"},
       "'--port=1' is not an rsslab_run flag"},
      {{"--profile=glibc", profiles, allow}, "give --command"},
      {{"--profile=glibc", profiles, "--stop_grace_ms=100"}, "--stop_grace_ms and --ok_exit_codes are --command's"},
      {{"--profile=glibc", profiles, "--command=argv", allow, "--allow_command_args=argv=--port={port}",
        "--ok_exit_codes=0,x"},
       "--ok_exit_codes=0,x: 'x' is not an exit code"},
  };
  for (const Case& c : cases) {
    auto r = ServerProcess::Run(run, c.args);
    EXPECT_EQ(r.exit_code, 64) << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.why));
  }
}

// Readiness as the operator sets it: by the port accepting connections
// (no ready flag), by a regex over the output, and a launch that is never
// ready failing with one line naming the command and what it waited for.
class AgentReadiness : public AgentWithShop {
 protected:
  void SetUp() override {
    const std::string shop = ServerProcess::Runfile("tests/anysvc/shop_service.py");
    StartAgent({"--listen=127.0.0.1:0", "--state_dir=none", "--log_dir=" + Tmp("ready-logs"),
              "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
              "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
              // The service takes ~5 s to start at a load of 15 (protoc, grpc import).
              "--ready_timeout_s=30",
              // Listens only after 1 s; no ready flag: ready when {port} accepts.
              "--allow_command=byport=" + shop,
              "--allow_command_args=byport=--port={port} --threads={threads} --start_after_s=1",
              // Never listens within the timeout.
              "--allow_command=slowport=" + shop,
              "--allow_command_args=slowport=--port={port} --start_after_s=60",
              // Prints its line, but not one the regex wants.
              "--allow_command=wrongline=" + shop,
              "--allow_command_args=wrongline=--port={port}",
              "--allow_command_ready=wrongline=^shop started on [0-9]+$",
              // The line, then the port.
              "--allow_command=both=" + shop,
              "--allow_command_args=both=--port={port}",
              "--allow_command_ready=both=ready data=127\\.0\\.0\\.1:[0-9]+ pid=",
              "--allow_command_ready_port=both={port}"});
  }
};

// One connect attempt, no retry: the port listens now.
bool ConnectsNow(const std::string& address) {
  const size_t colon = address.rfind(':');
  return launch::PortAccepts(address.substr(0, colon), std::stoi(address.substr(colon + 1)),
                             absl::Milliseconds(500));
}

TEST_F(AgentReadiness, ReadyWhenThePortAccepts) {
  for (const std::string cmd : {"byport", "both"}) {
    v1::ServerProcess s;
    grpc::Status st = Launch("jemalloc", cmd, &s);
    ASSERT_TRUE(st.ok()) << cmd << ": " << st.error_message();
    // Launch returned only once the service listened (byport listens 1 s
    // after it starts): the first connection is accepted.
    EXPECT_TRUE(ConnectsNow(s.data_address())) << cmd << " " << s.data_address();
    EXPECT_THAT(s.mapped_library(), HasSubstr("libjemalloc"));
    v1::ServerProcess stopped;
    ASSERT_TRUE(Stop(s.id(), &stopped).ok());
  }
}

TEST_F(AgentReadiness, NeverReadyIsOneLineNamingTheCommand) {
  struct Case {
    std::string command;
    std::string awaited;
  } cases[] = {
      {"slowport", "to accept a connection"},
      {"wrongline", "a line matching /^shop started on [0-9]+$/ in its output"},
  };
  // Both at once: each waits out the whole timeout.
  grpc::Status results[2];
  {
    std::vector<std::thread> launches;
    for (int i = 0; i < 2; ++i) {
      launches.emplace_back([&, i] {
        v1::ServerProcess s;
        results[i] = Launch("glibc", cases[i].command, &s);
      });
    }
    for (std::thread& t : launches) t.join();
  }
  for (int i = 0; i < 2; ++i) {
    const Case& c = cases[i];
    const grpc::Status& st = results[i];
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr("command " + c.command + " "));
    EXPECT_THAT(st.error_message(), HasSubstr("not ready within 30s"));
    EXPECT_THAT(st.error_message(), HasSubstr(c.awaited));
    EXPECT_EQ(st.error_message().find('\n'), std::string::npos) << st.error_message();
  }
  // Killed and reaped: nothing of them is left running.
  v1::ListRequest lr;
  v1::ListResponse resp;
  grpc::ClientContext cc;
  ASSERT_TRUE(stub_->List(&cc, lr, &resp).ok());
  for (const auto& s : resp.servers()) EXPECT_FALSE(s.running()) << s.ShortDebugString();
}

TEST(AgentCommandFlags, BadReadyRegexIsAUsageError) {
  auto r = ServerProcess::Run(
      ServerProcess::Runfile("agent/rsslab_agent"),
      {"--listen=127.0.0.1:0", "--state_dir=none", "--log_dir=" + Tmp("bad-logs"),
       "--server_binary=" + ServerProcess::Runfile("server/rsslab_server"),
       "--profile_file=" + ServerProcess::Runfile("agent/profiles.textproto"),
       "--allow_command=shop=" + ServerProcess::Runfile("tests/anysvc/shop_service.py"),
       "--allow_command_args=shop=--port={port}", "--allow_command_ready=shop=ready (v1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--allow_command_ready=shop=ready (v1: bad regex"));
}

}  // namespace
}  // namespace testing
}  // namespace rsslab
