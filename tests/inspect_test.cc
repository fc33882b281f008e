// rsslab_ctl inspect against real processes started here: seed 002's
// nested asyncio.run() leak and its fix in /usr/bin/python3, 16 threads with
// glibc arenas with and without MALLOC_ARENA_MAX at start, numpy on
// OpenBLAS with and without OPENBLAS_NUM_THREADS=1, jemalloc with and
// without background_thread, a clean sleeping python3, 10,000 threads, and
// bad pids, hostile thread names and environment, pools by their threads'
// names, a brk heap kept after a burst, a pre-fork master and gunicorn.
// Every rule fires in one test and stays quiet in another.
#include <malloc.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/strings/str_join.h"
#include "common/untrusted_text.h"
#include "common/pid.h"
#include "common/procfs/procfs.h"
#include "ctl/inspect.h"
#include "ctl/inspect_cli.h"
#include "ctl/inspect_processes.h"
#include "ctl/inspect_rules.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/inspect.pb.h"
#include "tests/scrape.h"
#include "tests/server_process.h"

namespace rsslab {
namespace {

using ::rsslab::testing::ServerProcess;
using ::rsslab::v1::InspectReport;

constexpr char kPython[] = "/usr/bin/python3";
constexpr char kJemalloc[] = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

// Starts `argv` through env(1), so variables can be removed (-u) as well as
// set: the rules look at what the process started with.
std::unique_ptr<ServerProcess> StartTarget(std::vector<std::string> argv,
                                           std::vector<std::string> unset = {},
                                           std::map<std::string, std::string> set = {}) {
  ServerProcess::Options o;
  o.binary = "/usr/bin/env";
  for (const std::string& u : unset) {
    o.args.push_back("-u");
    o.args.push_back(u);
  }
  o.args.insert(o.args.end(), argv.begin(), argv.end());
  o.env = std::move(set);
  o.ready_prefix = "inspect_target ready ";
  o.ready_timeout = absl::Seconds(60);
  auto p = ServerProcess::Start(o);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

std::string Helper() { return ServerProcess::Runfile("tests/inspect/threads_target"); }
std::string AsyncioScript() { return ServerProcess::Runfile("tests/inspect/asyncio_target.py"); }
std::string Ctl() { return ServerProcess::Runfile("ctl/rsslab_ctl"); }

// The batch window for the tests: wider than the default 50 ms, because a
// pool's threads start further apart on a loaded machine (load average 80
// seen here); the targets keep their events 200 ms or more apart.
InspectReport Inspect(int pid, absl::Duration window = absl::Milliseconds(150)) {
  InspectOptions o;
  o.batch_window = window;
  absl::StatusOr<InspectReport> r = BuildInspectReport(pid, o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return InspectReport();
  Diagnose(&*r);
  return *r;
}

const v1::Finding* FindingOf(const InspectReport& r, const std::string& rule) {
  for (const auto& f : r.findings()) {
    if (f.rule() == rule) return &f;
  }
  return nullptr;
}

std::string Rules(const InspectReport& r) {
  std::string out;
  for (const auto& f : r.findings()) absl::StrAppend(&out, f.rule(), ": ", f.summary(), "\n");
  return out.empty() ? "(none)" : out;
}

// --- executor_batches --------------------------------------------------

TEST(InspectTest, NestedAsyncioRunLeakShowsBatchesOfTheDefaultExecutor) {
  auto p = StartTarget({kPython, AsyncioScript(), "leak", "3"}, {"PYTHON_CPU_COUNT"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  const int pool = DefaultExecutorWorkers(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_EQ(r.python_version(), "3.11");
  const v1::Finding* f = FindingOf(r, "executor_batches");
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_TRUE(absl::StrContains(f->summary(), absl::StrCat("3 batches of exactly ", pool)))
      << f->summary();
  EXPECT_TRUE(absl::StrContains(f->fix(), "set_default_executor"));
  int batches = 0;
  for (const auto& b : r.batches()) {
    if (b.pool() == "ThreadPoolExecutor default") {
      ++batches;
      EXPECT_EQ(b.count(), pool);
      EXPECT_EQ(b.idle(), pool);
    }
  }
  EXPECT_EQ(batches, 3) << InspectText(r);
}

TEST(InspectTest, CappedRunnerAndAwaitedTasksAreQuiet) {
  auto p = StartTarget({kPython, AsyncioScript(), "capped", "3"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(FindingOf(r, "executor_batches"), nullptr) << InspectText(r);
  EXPECT_EQ(r.threads(), 1) << InspectText(r);  // every capped pool was joined
}

TEST(InspectTest, OneDefaultExecutorIsQuiet) {
  auto p = StartTarget({kPython, AsyncioScript(), "once"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.findings_size(), 0) << Rules(r);
}

// --- seed 002's three findings in one command ---------------------------

TEST(InspectTest, Seed002ThreeFindingsInOneReport) {
  auto p = StartTarget({kPython, AsyncioScript(), "seed002", "3"},
                       {"MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "LD_PRELOAD", "OPENBLAS_NUM_THREADS",
                        "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "PYTHON_CPU_COUNT"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_NE(FindingOf(r, "executor_batches"), nullptr) << InspectText(r);
  EXPECT_NE(FindingOf(r, "glibc_arenas"), nullptr) << InspectText(r);
  if (r.cpus_allowed() >= 2) {
    EXPECT_NE(FindingOf(r, "openblas_idle"), nullptr) << InspectText(r);
  }
}

// --- a clean process ---------------------------------------------------

TEST(InspectTest, CleanSleepingPythonHasNoFindings) {
  auto p = StartTarget({kPython, "-c",
                        "import os, time; print(f'inspect_target ready pid={os.getpid()}', "
                        "flush=True); time.sleep(60)"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.findings_size(), 0) << Rules(r);
  EXPECT_FALSE(r.partial());
  EXPECT_EQ(r.threads(), 1);
  EXPECT_EQ(r.allocator(), "glibc");
  EXPECT_EQ(r.python_version(), "3.11");
  EXPECT_FALSE(r.rsslab_loaded());
  EXPECT_GT(r.status().rss_bytes(), 0);
  EXPECT_EQ(r.memory_map().arena_count(), 0);
  // No pool is there, so none is listed (no "0 batches" line), and the brk
  // heap walked holds next to nothing a trim could give back.
  EXPECT_EQ(r.pools_size(), 0) << InspectText(r);
  EXPECT_FALSE(absl::StrContains(InspectText(r), "  pool      ")) << InspectText(r);
  EXPECT_TRUE(r.heap_walk().walked()) << r.heap_walk().note();
  EXPECT_LT(r.heap_walk().trimmable_bytes(), 4 << 20);
  EXPECT_TRUE(r.process_model().empty()) << r.process_model();
  EXPECT_EQ(r.children_total(), 0);
}

// --- hostile text, pools by name, retained heap, pre-fork workers -------

std::string ServiceScript() { return ServerProcess::Runfile("tests/inspect/service_target.py"); }

std::vector<std::string> Lines(const std::string& s) {
  return absl::StrSplit(s, '\n', absl::SkipEmpty());
}

TEST(InspectCliTest, HostileNamesEnvironmentAndArgumentsCannotForgeLines) {
  auto p = StartTarget({kPython, ServiceScript(), "hostile", "\nfake: line\x1b[0m\u2066x"}, {},
                       {{"MALLOC_ARENA_MAX", "2\nfindings: x1\u202ex"},
                        {"OPENBLAS_NUM_THREADS", "\x1b]0;pwn\x07\n  [leak] forged"},
                        {"GLIBC_TUNABLES", "glibc.malloc.x=\xff\xfe\n"}});
  ASSERT_NE(p, nullptr);
  const std::string pid = absl::StrCat("--pid=", p->pid());
  ServerProcess::Result text = ServerProcess::Run(Ctl(), {"inspect", pid});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_FALSE(absl::StrContains(text.out, "\x1b")) << text.out;
  int findings_lines = 0;
  for (const std::string& line : Lines(text.out)) {
    EXPECT_FALSE(absl::StartsWith(line, "fake")) << line;
    EXPECT_FALSE(absl::StrContains(line, "  [leak] forg") && absl::StartsWith(line, "  [")) << line;
    if (absl::StartsWith(line, "findings")) ++findings_lines;
  }
  EXPECT_EQ(findings_lines, 1) << text.out;
  // Still said, escaped: the names and values are evidence.
  EXPECT_TRUE(absl::StrContains(text.out, "\\nfindings: x1 x1")) << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "MALLOC_ARENA_MAX=2\\nfindings: x1")) << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "\\x1b[2Jfake: lin")) << text.out;
  // Bidirectional overrides and isolates (a thread's name, the environment,
  // the command line): shown as \uNNNN, never as the raw code point.
  EXPECT_FALSE(absl::StrContains(text.out, "\u202e")) << text.out;
  EXPECT_FALSE(absl::StrContains(text.out, "\u2066")) << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "\\u202egnp.exe")) << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "x1\\u202ex")) << text.out;

  ServerProcess::Result json = ServerProcess::Run(Ctl(), {"inspect", pid, "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(json.err, "") << "protobuf's log noise";
  ASSERT_EQ(Lines(json.out).size(), 1u) << json.out;
  EXPECT_TRUE(IsValidUtf8(json.out));
  // The JSON escapes them too (\u2066 of the command line; protobuf leaves it).
  EXPECT_FALSE(absl::StrContains(json.out, "\u202e")) << json.out;
  EXPECT_FALSE(absl::StrContains(json.out, "\u2066")) << json.out;
  InspectReport r;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &r).ok()) << json.out;
  bool carried = false;
  for (const auto& n : r.by_comm()) carried |= n.comm() == "\nfindings: x1";
  EXPECT_TRUE(carried) << json.out;
  EXPECT_EQ(r.start_env().at("GLIBC_TUNABLES"), "glibc.malloc.x=\xEF\xBF\xBD\xEF\xBF\xBD\n");
}

TEST(InspectTest, PoolsByTheirThreadsNames) {
  auto p = StartTarget({kPython, ServiceScript(), "pools"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  std::map<std::string, const v1::PoolSize*> pools;
  for (const auto& pool : r.pools()) pools[pool.name()] = &pool;
  ASSERT_EQ(pools.count("ThreadPoolExecutor"), 1u) << InspectText(r);
  EXPECT_EQ(pools["ThreadPoolExecutor"]->threads(), 3);
  ASSERT_EQ(pools.count("db_M"), 1u) << InspectText(r);
  EXPECT_EQ(pools["db_M"]->threads(), 2);
  EXPECT_EQ(pools["db_M"]->executors(), 1);
  ASSERT_EQ(pools.count("asyncio default executor"), 1u) << InspectText(r);
  EXPECT_EQ(pools["asyncio default executor"]->threads(), 3);
  EXPECT_EQ(pools["asyncio default executor"]->executors(), 2);
  EXPECT_EQ(pools.count("ThreadPoolExecutor default"), 0u) << InspectText(r);
  const std::string text = InspectText(r);
  EXPECT_TRUE(absl::StrContains(text, "pool      asyncio default executor: 3 threads by name"))
      << text;
  EXPECT_FALSE(absl::StrContains(text, "0 batches")) << text;

  // Full names, where a program's names are not cut (one executor per N).
  InspectReport named;
  for (const char* n : {"ThreadPoolExecutor-0_0", "ThreadPoolExecutor-0_1", "ThreadPoolExecutor-3_0",
                        "asyncio_0", "rsslab-w0", "census_a", "x_1"}) {
    auto* c = named.add_by_comm();
    c->set_comm(n);
    c->set_count(1);
  }
  RecognizeNamedPools(&named);
  std::vector<std::string> names;
  for (const auto& pool : named.pools()) names.push_back(absl::StrCat(pool.name(), "=", pool.threads()));
  EXPECT_EQ(absl::StrJoin(names, " "),
            "ThreadPoolExecutor-0=2 ThreadPoolExecutor-3=1 asyncio default executor=1");
}

TEST(InspectTest, RetainedHeapsAfterABurstAndTheirTrim) {
  auto p = StartTarget({kPython, ServiceScript(), "burst"}, {"GLIBC_TUNABLES", "LD_PRELOAD"},
                       {{"MALLOC_ARENA_MAX", "2"}});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  const v1::Finding* f = FindingOf(r, "retained_heap");
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_EQ(FindingOf(r, "glibc_arenas"), nullptr) << InspectText(r);
  ASSERT_TRUE(r.heap_walk().walked()) << r.heap_walk().note();
  EXPECT_GT(r.heap_walk().trimmable_bytes(), 40 << 20);  // the main thread's burst
  EXPECT_GE(r.heap_walk().arena_heaps_walked(), 1);
  EXPECT_GT(r.heap_walk().arena_trimmable_bytes(), 40 << 20);  // the thread's
  EXPECT_TRUE(absl::StrContains(f->summary(), "malloc_trim(0) would take RSS from")) << f->summary();
  EXPECT_TRUE(absl::StrContains(f->fix(), "rsslab.release()")) << f->fix();
  EXPECT_TRUE(absl::StrContains(f->fix(), "rsslab_ctl trim")) << f->fix();
  // The trim the finding predicts: RSS falls by about what it said, and the
  // finding goes (the free chunks are still there, their pages are not).
  const int64_t before = r.status().rss_bytes();
  const int64_t predicted = r.heap_walk().trimmable_bytes() + r.heap_walk().arena_trimmable_bytes();
  kill(p->pid(), SIGUSR1);
  InspectReport after;
  for (int i = 0; i < 50; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    after = Inspect(p->pid());
    if (FindingOf(after, "retained_heap") == nullptr) break;
  }
  EXPECT_EQ(FindingOf(after, "retained_heap"), nullptr) << InspectText(after);
  const int64_t freed = before - after.status().rss_bytes();
  EXPECT_GT(freed, predicted * 8 / 10) << InspectText(after);
  EXPECT_LT(freed, predicted * 12 / 10 + (2 << 20)) << InspectText(after);
}

// The advice names the registered process, not the address read now (a
// port can change hands before the user runs it): rsslab_ctl checks the
// entry again, and another user's process needs --as_user.
TEST(InspectTest, RetainedHeapAdviceNamesThePidNotTheAddress) {
  InspectReport r;
  r.set_pid(4242);
  r.set_allocator("glibc");
  r.set_threads(4);
  r.mutable_status()->set_rss_bytes(200 << 20);
  r.mutable_heap_walk()->set_walked(true);
  r.mutable_heap_walk()->set_trimmable_bytes(100 << 20);
  r.set_rsslab_control("127.0.0.1:45678");
  r.set_uid(static_cast<int32_t>(geteuid()) + 1);
  InspectReport own = r;
  own.set_uid(static_cast<int32_t>(geteuid()));
  Diagnose(&r);
  Diagnose(&own);
  const v1::Finding* f = FindingOf(r, "retained_heap");
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_TRUE(absl::StrContains(
      f->fix(), absl::StrCat("(at 127.0.0.1:45678): rsslab_ctl trim --control=pid:4242 --as_user=",
                             geteuid() + 1)))
      << f->fix();
  ASSERT_NE(FindingOf(own, "retained_heap"), nullptr) << InspectText(own);
  const std::string own_fix = FindingOf(own, "retained_heap")->fix();
  EXPECT_TRUE(absl::StrContains(own_fix, "rsslab_ctl trim --control=pid:4242")) << own_fix;
  EXPECT_FALSE(absl::StrContains(own_fix, "--as_user")) << own_fix;
}

TEST(InspectTest, PreforkMasterNamesItsWorkers) {
  auto p = StartTarget({kPython, ServiceScript(), "prefork", "3"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.children_total(), 3) << InspectText(r);
  ASSERT_EQ(r.children_size(), 3) << InspectText(r);
  EXPECT_EQ(r.process_model(), "pre-fork master");
  const std::string text = InspectText(r);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(r.children(k).comm(), absl::StrCat("worker-", k));
    EXPECT_TRUE(absl::StrContains(
        text, absl::StrCat("child    pid ", r.children(k).pid(), " (worker-", k, ")")))
        << text;
  }
}

TEST(InspectTest, GunicornMasterAndItsGthreadWorkers) {
  const std::string conf = ServerProcess::Runfile("tests/inspect/gunicorn_conf.py");
  const std::string app = ServerProcess::Runfile("tests/inspect/wsgi_app.py");
  auto p = StartTarget({"/usr/bin/gunicorn", "--config", conf, "--chdir",
                        app.substr(0, app.rfind('/')), "wsgi_app:app"});
  ASSERT_NE(p, nullptr);
  InspectReport r;
  // when_ready runs before the workers are forked.
  for (int i = 0; i < 100 && r.children_total() < 2; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    r = Inspect(p->pid());
  }
  EXPECT_EQ(r.process_model(), "gunicorn master") << InspectText(r);
  ASSERT_EQ(r.children_size(), 2) << InspectText(r);
  for (const auto& c : r.children()) {
    EXPECT_EQ(c.process_model(), "gunicorn worker") << c.cmdline();
  }
  InspectReport worker = Inspect(r.children(0).pid());
  EXPECT_EQ(worker.process_model(), "gunicorn worker") << InspectText(worker);
  EXPECT_EQ(ProcessModel("python3", "gunicorn: master [app:app]", "bash", 0), "gunicorn master");
  EXPECT_EQ(ProcessModel("python3", "gunicorn: worker [app:app]", "python3", 0), "gunicorn worker");
  EXPECT_EQ(ProcessModel("uvicorn", "/srv/app/venv/bin/python3 /srv/app/venv/bin/uvicorn app:app",
                         "bash", 0),
            "uvicorn");
  EXPECT_EQ(ProcessModel("python3", "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main",
                         "uvicorn", 0),
            "uvicorn worker");
}

// --- glibc_arenas ------------------------------------------------------

TEST(InspectTest, SixteenThreadsWithOwnArenasAndNoArenaMax) {
  auto p = StartTarget({Helper(), "--threads=16", "--malloc_kib=2048"},
                       {"MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "LD_PRELOAD"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_GE(r.memory_map().arena_count(), kManyArenas);
  const v1::Finding* f = FindingOf(r, "glibc_arenas");
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_TRUE(absl::StrContains(f->summary(), "MALLOC_ARENA_MAX not in the start environment"));
  EXPECT_TRUE(absl::StrContains(f->fix(), "MALLOC_ARENA_MAX=2"));
}

TEST(InspectTest, SixteenThreadsWithArenaMaxAtStartAreQuiet) {
  auto p = StartTarget({Helper(), "--threads=16", "--malloc_kib=2048"},
                       {"GLIBC_TUNABLES", "LD_PRELOAD"}, {{"MALLOC_ARENA_MAX", "2"}});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_LE(r.memory_map().arena_count(), 2) << InspectText(r);
  EXPECT_EQ(r.start_env().at("MALLOC_ARENA_MAX"), "2");
  EXPECT_EQ(FindingOf(r, "glibc_arenas"), nullptr) << InspectText(r);
}

// --- openblas_idle -----------------------------------------------------

constexpr char kNumpy[] =
    "import os, time, numpy; print(f'inspect_target ready pid={os.getpid()}', flush=True); "
    "time.sleep(60)";

TEST(InspectTest, NumpyOpenblasPoolIdle) {
  // OPENBLAS_CORETYPE (set on some machines) picks kernels, not threads: left as it is.
  auto p = StartTarget({kPython, "-c", kNumpy},
                       {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  bool openblas = false;
  for (const auto& l : r.libraries()) openblas |= absl::StrContains(l, "libopenblas");
  if (!openblas) GTEST_SKIP() << "numpy is not on OpenBLAS here (libopenblas0-pthread)";
  if (r.cpus_allowed() < 2) GTEST_SKIP() << "one CPU: OpenBLAS starts no pool";
  // OpenBLAS's workers spin before they sleep (its THREAD_TIMEOUT), longer
  // when the machine is busy: a look in that window rightly finds them
  // running, not idle. Look again for up to 5 s.
  const v1::Finding* f = FindingOf(r, "openblas_idle");
  for (int i = 0; f == nullptr && i < 50; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    r = Inspect(p->pid());
    f = FindingOf(r, "openblas_idle");
  }
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_TRUE(absl::StrContains(f->summary(), absl::StrCat("with ", r.cpus_allowed() - 1, " thread")))
      << f->summary();
  EXPECT_TRUE(absl::StrContains(f->fix(), "OPENBLAS_NUM_THREADS=1"));
  EXPECT_EQ(r.threads(), r.cpus_allowed());
}

TEST(InspectTest, NumpyWithOpenblasNumThreadsOneIsQuiet) {
  auto p = StartTarget({kPython, "-c", kNumpy}, {"GOTO_NUM_THREADS", "OMP_NUM_THREADS"},
                       {{"OPENBLAS_NUM_THREADS", "1"}});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.findings_size(), 0) << Rules(r);
  EXPECT_EQ(r.threads(), 1);
  EXPECT_EQ(r.start_env().at("OPENBLAS_NUM_THREADS"), "1");
}

// --- openmp_idle -------------------------------------------------------

TEST(InspectTest, OpenmpTeamIdle) {
  auto p = StartTarget({ServerProcess::Runfile("tests/inspect/openmp_target")},
                       {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  if (r.cpus_allowed() < 2) GTEST_SKIP() << "one CPU: the team is the calling thread alone";
  // The main thread may still be running just after its ready line (a
  // busy machine): idle is the state it settles in, so look again a while.
  for (int i = 0; i < 30 && FindingOf(r, "openmp_idle") == nullptr; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    r = Inspect(p->pid());
  }
  const v1::Finding* f = FindingOf(r, "openmp_idle");
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_TRUE(absl::StrContains(f->fix(), "OMP_NUM_THREADS=1"));
  EXPECT_EQ(r.findings_size(), 1) << Rules(r);
}

TEST(InspectTest, OpenmpWithOneThreadIsQuiet) {
  auto p = StartTarget({ServerProcess::Runfile("tests/inspect/openmp_target")}, {},
                       {{"OMP_NUM_THREADS", "1"}});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.threads(), 1);
  EXPECT_EQ(r.findings_size(), 0) << Rules(r);
}

// --- jemalloc_bg -------------------------------------------------------

TEST(InspectTest, JemallocBackgroundThreadsAreExpected) {
  auto p = StartTarget({Helper(), "--threads=4", "--malloc_kib=256"}, {},
                       {{"LD_PRELOAD", kJemalloc}, {"MALLOC_CONF", "background_thread:true"}});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.allocator(), "jemalloc");
  const v1::Finding* f = FindingOf(r, "jemalloc_bg");
  ASSERT_NE(f, nullptr) << InspectText(r);
  EXPECT_EQ(f->severity(), "expected");
  EXPECT_TRUE(absl::StrContains(f->summary(), "jemalloc_bg_thd")) << f->summary();
  EXPECT_EQ(r.start_env().at("MALLOC_CONF"), "background_thread:true");
  EXPECT_EQ(FindingOf(r, "glibc_arenas"), nullptr);
}

TEST(InspectTest, JemallocWithoutBackgroundThreadIsQuiet) {
  auto p = StartTarget({Helper(), "--threads=4", "--malloc_kib=256"}, {"MALLOC_CONF"},
                       {{"LD_PRELOAD", kJemalloc}});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_EQ(r.allocator(), "jemalloc");
  EXPECT_EQ(r.findings_size(), 0) << Rules(r);
}

// --- the rsslab package: detected by its mapped _rsslab*.so, its Control
// address read from the file serve() writes (the contract in docs/INSPECT.md).
// A stand-in: a copy of a stdlib extension named _rsslab..., loaded with
// ctypes, and the address file written as the contract says.
constexpr char kFakePackage[] =
    "import ctypes, os, shutil, sys, time\n"
    "d = sys.argv[1]\n"
    "so = os.path.join(d, '_rsslab.cpython-311-x86_64-linux-gnu.so')\n"
    "shutil.copy('/usr/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so', so)\n"
    "ctypes.CDLL(so)\n"
    "run = os.environ.get('XDG_RUNTIME_DIR') or '/tmp'\n"
    "import socket\n"
    "s = socket.socket()\n"  // its Control port: listened on by this process
    "s.bind(('127.0.0.1', 0))\n"
    "s.listen()\n"
    "addr = '127.0.0.1:%d' % s.getsockname()[1]\n"
    "open(os.path.join(d, 'addr'), 'w').write(addr)\n"
    "tmp = os.path.join(run, f'.rsslab-control-{os.getpid()}.addr.tmp')\n"
    "start = open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]\n"
    "with open(tmp, 'w') as f:\n"
    "    f.write(f'{addr}\\nservice=fake\\npid={os.getpid()}\\nstart={start}\\n')\n"
    "os.chmod(tmp, 0o600)\n"
    "os.replace(tmp, os.path.join(run, f'rsslab-control-{os.getpid()}.addr'))\n"
    "print(f'inspect_target ready pid={os.getpid()}', flush=True)\n"
    "time.sleep(60)\n";

TEST(InspectTest, RsslabPackageByItsOwnLayout) {
  // The package as built (python/): rsslab/_native.so. A stand-in again.
  const char* tmp = getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  auto p = StartTarget(
      {kPython, "-c",
       "import ctypes, os, shutil, sys, time\n"
       "d = os.path.join(sys.argv[1], 'rsslab'); os.makedirs(d, exist_ok=True)\n"
       "so = os.path.join(d, '_native.so')\n"
       "shutil.copy('/usr/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so', so)\n"
       "ctypes.CDLL(so)\n"
       "print(f'inspect_target ready pid={os.getpid()}', flush=True)\n"
       "time.sleep(60)\n",
       tmp},
      {"XDG_RUNTIME_DIR"});
  ASSERT_NE(p, nullptr);
  InspectReport r = Inspect(p->pid());
  EXPECT_TRUE(r.rsslab_loaded()) << InspectText(r);
  EXPECT_TRUE(absl::EndsWith(r.rsslab_module(), "/rsslab/_native.so")) << r.rsslab_module();
  EXPECT_EQ(r.rsslab_control_note(), "not registered");
}

TEST(InspectTest, RsslabPackageAndItsControlAddress) {
  const char* tmp = getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  auto p = StartTarget({kPython, "-c", kFakePackage, tmp}, {}, {{"XDG_RUNTIME_DIR", tmp}});
  ASSERT_NE(p, nullptr);
  std::string address;
  std::getline(std::ifstream(absl::StrCat(tmp, "/addr")), address);
  InspectReport r = Inspect(p->pid());
  EXPECT_TRUE(r.rsslab_loaded()) << InspectText(r);
  EXPECT_TRUE(absl::EndsWith(r.rsslab_module(), "/_rsslab.cpython-311-x86_64-linux-gnu.so"));
  EXPECT_EQ(r.rsslab_control(), address) << r.rsslab_control_note();
  EXPECT_TRUE(absl::StrContains(InspectText(r), "control " + address));
  const std::string file = ControlAddressFile(tmp, p->pid());

  // An entry naming a port its process does not listen on is not its
  // Control (a port closed and bound since by another program).
  {
    std::string text;
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    const std::string moved = "127.0.0.1:1" + text.substr(text.find('\n'));
    std::ofstream(file, std::ios::trunc) << moved;
    r = Inspect(p->pid());
    EXPECT_EQ(r.rsslab_control(), "");
    EXPECT_TRUE(absl::StrContains(r.rsslab_control_note(), "no socket listens there"))
        << r.rsslab_control_note();
    std::ofstream(file, std::ios::trunc) << text;
  }

  // A file that is not the target user's is not trusted.
  if (geteuid() == 0) {
    ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0);
    r = Inspect(p->pid());
    EXPECT_EQ(r.rsslab_control(), "");
    EXPECT_TRUE(absl::StrContains(r.rsslab_control_note(), "owned by uid 65534")) << r.rsslab_control_note();
    ASSERT_EQ(chown(file.c_str(), 0, 0), 0);
  }
  // Nor one that is not in the entry format (registry/registry.h).
  {
    std::ofstream out(file, std::ios::trunc);
    out << "127.0.0.1:99999\n";
  }
  r = Inspect(p->pid());
  EXPECT_EQ(r.rsslab_control(), "");
  EXPECT_TRUE(absl::StrContains(r.rsslab_control_note(), "not HOST:PORT")) << r.rsslab_control_note();
  unlink(file.c_str());
  r = Inspect(p->pid());
  EXPECT_TRUE(r.rsslab_loaded());
  EXPECT_EQ(r.rsslab_control_note(), "not registered");
}

// --- bounded: 10,000 threads -------------------------------------------

int64_t SelfHwm() {
  v1::ProcStatus s;
  EXPECT_TRUE(procfs::ReadStatus(0, &s).ok());
  return s.hwm_bytes();
}

TEST(InspectTest, TenThousandThreadsInBoundedTimeAndMemory) {
  auto p = StartTarget({Helper(), "--threads=10000", "--stack_kib=64", "--malloc_kib=0"});
  ASSERT_NE(p, nullptr);
  // The per-thread reader allocates nothing on the heap.
  struct mallinfo2 before = mallinfo2();
  int seen = 0;
  const absl::Time t0 = absl::Now();
  procfs::ThreadScan scan;
  ASSERT_TRUE(procfs::ForEachThread(
                  p->pid(), procfs::kThreadStat | procfs::kThreadWchan,
                  [&](const procfs::ThreadView& t) { seen += t.state != '?' ? 1 : 0; }, &scan)
                  .ok());
  const absl::Duration scan_time = absl::Now() - t0;
  struct mallinfo2 after = mallinfo2();
  EXPECT_EQ(seen, 10001);
  EXPECT_EQ(after.uordblks, before.uordblks);
  EXPECT_LT(scan_time, absl::Seconds(10)) << "loose bound; ~0.1 s when idle";

  // The whole report: loose bounds (a shared 2-core machine).
  const int64_t hwm0 = SelfHwm();
  const absl::Time t1 = absl::Now();
  InspectReport r = Inspect(p->pid());
  const absl::Duration report_time = absl::Now() - t1;
  EXPECT_EQ(r.threads(), 10001);
  EXPECT_FALSE(r.partial()) << r.partial_reasons(0);
  EXPECT_LT(report_time, absl::Seconds(20));
  EXPECT_LT(SelfHwm() - hwm0, 64 << 20) << "inspecting 10,000 threads grew our peak RSS";
  int in_batches = 0;
  for (const auto& b : r.batches()) in_batches += b.count();
  EXPECT_EQ(in_batches + r.threads_in_dropped_batches(), 10001);

  // The server's census is the same code: it counts them too.
  google::protobuf::RepeatedPtrField<v1::ThreadName> census;
  ASSERT_TRUE(procfs::ThreadCensus(p->pid(), &census).ok());
  int total = 0;
  for (const auto& c : census) total += c.count();
  EXPECT_EQ(total, 10001);

  // Past max_threads the report says it is partial instead of growing.
  InspectOptions small;
  small.max_threads = 100;
  absl::StatusOr<InspectReport> cut = BuildInspectReport(p->pid(), small);
  ASSERT_TRUE(cut.ok());
  EXPECT_TRUE(cut->partial());
  EXPECT_EQ(cut->threads(), 100);
}

// --- bad input ---------------------------------------------------------

TEST(InspectCliTest, AbsentPidIsOneLineExit2) {
  // The highest pid the kernel can hand out: rarely in use.
  const int last = PidMax() - 1;
  ServerProcess::Result r = ServerProcess::Run(Ctl(), {"inspect", absl::StrCat("--pid=", last)});
  if (kill(last, 0) == 0) GTEST_SKIP();
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, absl::StrCat("no process with pid ", last))) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = ServerProcess::Run(Ctl(), {"inspect", absl::StrCat("--pid=", PidMax())});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "pid_max")) << r.err;
  // What the int flag's parser took as pids 5 and 16 (and -3): refused,
  // one line naming the input, nothing inspected.
  for (const char* bad : {"--pid=-3", "--pid= 5", "--pid=0x10", "--pid=+5", "--pid=5\n"}) {
    r = ServerProcess::Run(Ctl(), {"inspect", bad});
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "--pid: ")) << r.err;
    EXPECT_TRUE(r.out.empty()) << bad << ": " << r.out;
  }
  r = ServerProcess::Run(Ctl(), {"inspect"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--pid")) << r.err;
  r = ServerProcess::Run(Ctl(), {"inspect", "--pid=1", "--metrics_listen=127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "--watch")) << r.err;
}

// `inspect PID` is `inspect --pid=PID`: the same report; the positional
// pid is checked as the flag is, and one pid only.
TEST(InspectCliTest, PidAsArgumentOrFlag) {
  auto p = StartTarget({kPython, "-c",
                        "import os, time; print(f'inspect_target ready pid={os.getpid()}', "
                        "flush=True); time.sleep(60)"});
  ASSERT_NE(p, nullptr);
  const std::string pid = absl::StrCat(p->pid());
  ServerProcess::Result arg = ServerProcess::Run(Ctl(), {"inspect", pid});
  ServerProcess::Result flag = ServerProcess::Run(Ctl(), {"inspect", "--pid=" + pid});
  EXPECT_EQ(arg.exit_code, 0) << arg.err;
  EXPECT_EQ(flag.exit_code, 0) << flag.err;
  // The same process in both reports (the first line differs only in its age).
  for (const std::string& out : {arg.out, flag.out}) {
    EXPECT_TRUE(absl::StartsWith(out, absl::StrCat("pid ", pid, " (python3)  uid "))) << out;
  }
  // Flags after the pid still count.
  ServerProcess::Result json = ServerProcess::Run(Ctl(), {"inspect", pid, "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(absl::StartsWith(json.out, "{")) << json.out.substr(0, 200);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"inspect", "0x10"}, {"inspect", " 5"}, {"inspect", "5x"}}) {
    ServerProcess::Result r = ServerProcess::Run(Ctl(), bad);
    EXPECT_EQ(r.exit_code, 2) << bad[1];
    EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "inspect PID: ")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  for (const std::vector<std::string>& two :
       {std::vector<std::string>{"inspect", pid, "--pid=" + pid}, {"inspect", pid, pid}}) {
    ServerProcess::Result r = ServerProcess::Run(Ctl(), two);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(absl::StrContains(r.err, "one process id")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// The refusal names the process by the name it chose: escaped, like the report.
TEST(InspectCliTest, ZombieWithAHostileNameIsOneEscapedLine) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    prctl(PR_SET_NAME, "\xe2\x80\xae" "z\x1b[31m", 0, 0, 0);
    _exit(0);
  }
  // Not reaped until the end: a zombie meanwhile.
  std::string state;
  for (int i = 0; i < 500 && state != "Z"; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
    absl::StatusOr<std::string> stat = procfs::ReadProcFile(child, "stat");
    if (stat.ok() && stat->rfind(')') != std::string::npos) state = stat->substr(stat->rfind(')') + 2, 1);
  }
  ServerProcess::Result r = ServerProcess::Run(Ctl(), {"inspect", absl::StrCat("--pid=", child)});
  waitpid(child, nullptr, 0);
  ASSERT_EQ(state, "Z");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "is a zombie")) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "(\\u202ez\\x1b[31m)")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "\x1b")) << r.err;
  EXPECT_FALSE(absl::StrContains(r.err, "\u202e")) << r.err;
}

TEST(InspectCliTest, KernelThreadIsOneLineExit2) {
  // kthreadd is pid 2 where the kernel's threads are visible.
  absl::StatusOr<std::string> stat = procfs::ReadProcFile(2, "stat");
  procfs::ThreadView t;
  if (!stat.ok() || !procfs::ParseThreadStat(*stat, &t) || !(t.flags & 0x00200000)) {
    GTEST_SKIP() << "no kernel thread visible as pid 2 here";
  }
  ServerProcess::Result r = ServerProcess::Run(Ctl(), {"inspect", "--pid=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "kernel thread")) << r.err;
}

TEST(InspectCliTest, OtherUsersProcessIsOneLineExit2) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to start processes as two other users";
  // The target runs as nobody (65534), the inspector as uid 65533.
  ServerProcess::Options o;
  o.binary = "/usr/bin/setpriv";
  o.args = {"--reuid=65534", "--regid=65534", "--clear-groups", kPython, "-c",
            "import os, time; print(f'inspect_target ready pid={os.getpid()}', flush=True); "
            "time.sleep(60)"};
  o.ready_prefix = "inspect_target ready ";
  auto started = ServerProcess::Start(o);
  if (!started.ok()) GTEST_SKIP() << "cannot start a process as uid 65534 here: " << started.status();
  std::unique_ptr<ServerProcess> p = std::move(*started);
  // A copy uid 65533 can execute (the runfiles live under root's home).
  char dir[] = "/tmp/rsslab-inspect-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string ctl = absl::StrCat(dir, "/rsslab_ctl");
  {
    std::ifstream in(Ctl(), std::ios::binary);
    std::ofstream out(ctl, std::ios::binary);
    out << in.rdbuf();
  }
  ASSERT_EQ(chmod(dir, 0755), 0);
  ASSERT_EQ(chmod(ctl.c_str(), 0755), 0);
  ServerProcess::Result r = ServerProcess::Run(
      "/usr/bin/setpriv", {"--reuid=65533", "--regid=65533", "--clear-groups", ctl, "inspect",
                           absl::StrCat("--pid=", p->pid())});
  unlink(ctl.c_str());
  rmdir(dir);
  if (r.exit_code == 126 || r.exit_code == 127) {
    GTEST_SKIP() << "uid 65533 cannot run the test binary here: " << r.err;
  }
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(Lines(r.err).size(), 1u) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "uid 65534")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(InspectTest, ProcessExitingMidReadIsAnErrorOrPartialNeverAStaleReport) {
  // Short-lived children inspected as they exit: each read either fails with
  // one of the documented errors or returns a report, marked partial if the
  // process went away during it.
  int ok = 0, gone = 0;
  for (int i = 0; i < 30; ++i) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl("/bin/true", "true", nullptr);
      _exit(127);
    }
    absl::StatusOr<InspectReport> r = BuildInspectReport(pid);
    if (r.ok()) {
      ++ok;
    } else {
      ++gone;
      EXPECT_TRUE(absl::IsNotFound(r.status()) || absl::IsFailedPrecondition(r.status()))
          << r.status();
      EXPECT_FALSE(absl::StrContains(r.status().message(), "\n"));
    }
    int st;
    waitpid(pid, &st, 0);
    // Reaped: now it is gone for certain.
    absl::StatusOr<InspectReport> after = BuildInspectReport(pid);
    EXPECT_TRUE(absl::IsNotFound(after.status())) << after.status();
  }
  EXPECT_EQ(ok + gone, 30);
}

// --- --json, --watch, --metrics_listen ---------------------------------

TEST(InspectCliTest, JsonIsOneReportThenOneSampleALine) {
  auto p = StartTarget({Helper(), "--threads=3", "--malloc_kib=64"});
  ASSERT_NE(p, nullptr);
  ServerProcess::Result r = ServerProcess::Run(
      Ctl(), {"inspect", absl::StrCat("--pid=", p->pid()), "--json", "--watch=200ms", "--count=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  InspectReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[0], &report).ok()) << lines[0];
  EXPECT_EQ(report.pid(), p->pid());
  EXPECT_EQ(report.threads(), 4);
  for (int i = 1; i < 4; ++i) {
    v1::InspectSample s;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(lines[i], &s).ok()) << lines[i];
    EXPECT_EQ(s.sample(), i - 1);
    EXPECT_EQ(s.threads(), 4);
    EXPECT_FALSE(s.flagged()) << s.flag_reason();
  }
}

TEST(InspectCliTest, WatchOfAGrowingProcessFlagsThreadsAndExportsGauges) {
  // The leak grows by one pool every 0.5 s while it starts: watch it grow.
  ServerProcess::Options t;
  t.binary = kPython;
  t.args = {"-c",
            "import os, threading, time\n"
            "print(f'inspect_target ready pid={os.getpid()}', flush=True)\n"
            "ev = threading.Event()\n"
            "for i in range(200):\n"
            "    threading.Thread(target=ev.wait, daemon=True).start()\n"
            "    time.sleep(0.05)\n"
            "time.sleep(60)\n"};
  t.ready_prefix = "inspect_target ready ";
  auto target = ServerProcess::Start(t);
  ASSERT_TRUE(target.ok()) << target.status();
  ServerProcess::Options o;
  o.binary = Ctl();
  o.args = {"inspect", absl::StrCat("--pid=", (*target)->pid()), "--watch=300ms",
            "--metrics_listen=127.0.0.1:0"};
  o.ready_prefix = "rsslab_ctl inspect ready ";
  auto ctl = ServerProcess::Start(o);
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  // The exporter answers before the first sample with zeros; wait for samples.
  std::map<std::string, double> m;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    m = testing::ParseExposition(
        testing::Body(testing::Http((*ctl)->metrics_address(), "GET /metrics HTTP/1.1\r\n\r\n")));
    if (m["rsslab_inspect_samples"] >= 4) break;
    absl::SleepFor(absl::Milliseconds(100));  // polling a scrape, not waiting for readiness
  }
  EXPECT_GE(m["rsslab_inspect_samples"], 4);
  EXPECT_GT(m["rsslab_process_threads"], 1);
  EXPECT_GT(m["rsslab_process_resident_memory_bytes"], 0);
  EXPECT_GT(m["rsslab_inspect_threads_growth_per_hour"], 1000) << "~20 threads/s = 72000/h";
  EXPECT_EQ(m.count("rsslab_glibc_arenas"), 1u);
  (*ctl)->Stop();
}

}  // namespace
}  // namespace rsslab
