#include "server/run_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "common/flags_parse.h"
#include "common/protobuf_log.h"
#include "common/auth.h"
#include "common/handler_params.h"
#include "common/listen.h"
#include "common/metrics/http_server.h"
#include "common/ready_line.h"
#include "common/server_flags.h"
#include "common/shipped.h"
#include "common/units.h"
#include "control/service/control_service.h"
#include "control/service/request_check.h"
#include "common/auto_trim_table.h"
#include "server/core.h"
#include "server/load_service.h"
#include "server/server_metrics.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Data plane (Load service) address; port 0 picks a free port.");
ABSL_FLAG(std::string, control_listen, "127.0.0.1:50052",
          "Control plane address; port 0 picks a free port.");
// Defaults come from ServerCore::Options, the one place they are set.
ABSL_FLAG(int, threads, rsslab::ServerCore::Options().threads,
          "Python worker threads (a fixed pool named rsslab-w<N>).");
ABSL_FLAG(std::string, handler, "",
          "Handler .py file exposing handle(request, cache); default: the shipped "
          "server/handlers/web_worker.py.");
ABSL_FLAG(std::string, handler_params, "",
          "Default handler params, k=v,k=v (a request's params override them).");
ABSL_FLAG(int64_t, cache_limit_mb, rsslab::ServerCore::Options().cache_limit_bytes >> 20,
          "Initial cache limit in MiB.");
ABSL_FLAG(int64_t, max_cache_limit_mb, 0,
          "Largest cache limit a client may set, MiB (default: MemTotal).");
ABSL_FLAG(std::string, thread_mode,
          rsslab::ThreadModeName(rsslab::ServerCore::Options().thread_mode),
          "fixed, or churn: replace each worker thread after --churn_every requests (seed 002).");
ABSL_FLAG(int, churn_every, rsslab::ServerCore::Options().churn_every,
          "Requests per worker thread in --thread_mode=churn.");
ABSL_FLAG(int, churn_overlap_ms,
          absl::ToInt64Milliseconds(rsslab::ServerCore::Options().churn_overlap),
          "--thread_mode=churn: a replaced worker thread stays alive (idle) this long after its "
          "successor started serving, as executor threads do; 0 = the successor starts after "
          "it exited (glibc then reuses its arena).");
ABSL_FLAG(int, stuck_after_ms, absl::ToInt64Milliseconds(rsslab::ServerCore::Options().stuck_after),
          "A worker busy this long is reported as stuck in snapshots.");
ABSL_FLAG(int64_t, max_message_mb, 16, "Largest request or response message, MiB.");
ABSL_FLAG(int, max_watch_streams, 16, "Concurrent WatchSnapshots streams allowed.");
ABSL_FLAG(std::string, auto_trim, "off",
          "Automatic trim (global + per-thread): off, after_burst (once load has dropped "
          "and RSS exceeds the live estimate by --auto_trim_gap_mb), or interval. docs/TRIM.md.");
ABSL_FLAG(int64_t, auto_trim_gap_mb, 16, "Auto trim only when RSS - live estimate >= this, MiB.");
ABSL_FLAG(int, auto_trim_settle_ms, 2000,
          "after_burst: load must stay dropped (rate <= --auto_trim_settle_fraction x recent peak, "
          "or 0) this long.");
ABSL_FLAG(double, auto_trim_settle_fraction, 0.1, "after_burst: what counts as dropped load.");
ABSL_FLAG(int, auto_trim_interval_s, 60, "interval: seconds between automatic trims.");
ABSL_FLAG(int, auto_trim_min_spacing_s, 10,
          "Never auto trim within this many seconds of any trim.");
ABSL_FLAG(bool, trim_thread_stats, false,
          "Each worker reads the allocator's per-thread figures (mimalloc heap areas, jemalloc "
          "thread arena) before and after its release; in the trim result's workers[].");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve Prometheus metrics (HTTP GET /metrics) at HOST:PORT; a bare PORT means "
          "127.0.0.1:PORT. Off when empty.");
ABSL_FLAG(int, shutdown_grace_ms, 10000,
          "On SIGTERM/SIGINT, how long in-flight calls may take to finish; a call still "
          "running after it makes the server exit 3 naming the busy workers.");
ABSL_FLAG(int, handler_budget_ms, 10000,
          "Per-request time budget of the handler: a call running longer fails with "
          "DEADLINE_EXCEEDED (HandlerBudgetExceeded is raised in it); 0 = no budget. "
          "docs/RELIABILITY.md.");

namespace rsslab {
namespace {

constexpr int kExitUsage = 2;
// A handler call still running after --shutdown_grace_ms.
constexpr int kExitStuck = 3;
// After the grace period, how long the rest of the shutdown (gRPC, workers,
// interpreter) may take before the process exits anyway.
constexpr absl::Duration kShutdownSlack = absl::Seconds(5);

// Something in the environment failed (a port taken, a handler that does
// not import): exit 1.
[[noreturn]] void Die(const std::string& msg) {
  fprintf(stderr, "rsslab_server: %s\n", msg.c_str());
  fflush(stderr);
  _exit(1);
}

// The command line is wrong (a value out of range, an unusable file): exit 2.
[[noreturn]] void DieUsage(const std::string& msg) {
  fprintf(stderr, "rsslab_server: %s\n", msg.c_str());
  fflush(stderr);
  _exit(kExitUsage);
}

// A flag's range, from the one table the agent and rsslab_run check too.
int64_t Lo(absl::string_view flag) { return ServerFlag(flag).min; }
int64_t Hi(absl::string_view flag) { return ServerFlag(flag).max; }

void Need(const absl::Status& s) {
  if (!s.ok()) DieUsage(std::string(s.message()));
}

// An --auto_trim* flag against common/auto_trim_table.h, the range
// rsslab.auto_trim() applies too.
void NeedAutoTrim(absl::string_view flag, double value) {
  Need(CheckAutoTrimValue(*FindAutoTrimFlag(flag), value, AutoTrimCaller::kServerFlag));
}

template <typename T>
T Need(absl::StatusOr<T> v) {
  Need(v.status());
  return *std::move(v);
}

// SIGTERM/SIGINT are blocked in every thread and taken by this one from the
// first moment, so the server answers them at every stage: before the ready
// line (e.g. while a handler's import hangs) it exits at once with 128+sig;
// after it, the first signal starts the drain and a second one exits at once.
class StopSignals {
 public:
  explicit StopSignals(const sigset_t& set) : set_(set) {
    std::thread([this] { Loop(); }).detach();
  }
  void SetReady() { ready_.store(true); }
  int Wait() {
    got_.WaitForNotification();
    return sig_.load();
  }

 private:
  void Loop() {
    int sig = 0;
    int seen = 0;
    while (sigwait(&set_, &sig) == 0) {
      const char* name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
      if (!ready_.load()) {
        fprintf(stderr,
                "rsslab_server: %s received while starting (before the ready line); exiting\n",
                name);
        fflush(stderr);
        _exit(128 + sig);
      }
      if (++seen > 1) {
        fprintf(stderr, "rsslab_server: second %s during shutdown; exiting now\n", name);
        fflush(stderr);
        _exit(128 + sig);
      }
      sig_.store(sig);
      got_.Notify();
    }
  }
  const sigset_t set_;
  std::atomic<bool> ready_{false};
  std::atomic<int> sig_{0};
  absl::Notification got_;
};

// The shipped handler, wherever the binary runs from.
std::string DefaultHandler() {
  std::string found = FindShipped(DefaultHandlerPath());
  if (found.empty()) {
    Die(absl::StrCat("cannot find the default handler ", DefaultHandlerPath(),
                     "; pass --handler=PATH or set RSSLAB_HOME"));
  }
  return found;
}

// `cq`: when set, a completion queue for an async service is added and
// returned there.
std::unique_ptr<grpc::Server> Listen(const std::string& flag, const std::string& address,
                                     const Security& security,
                                     const std::function<void(grpc::ServerBuilder*)>& register_fn,
                                     int* port,
                                     std::unique_ptr<grpc::ServerCompletionQueue>* cq = nullptr) {
  absl::Status s = CheckBindable(address);
  if (!s.ok()) Die(absl::StrCat(s.message(), " (--", flag, ")"));
  grpc::ServerBuilder b;
  // Without this a second server could share a port silently.
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddListeningPort(address, security.ServerCredentials(), port);
  // Bounded so a hostile or broken client cannot make the server buffer
  // arbitrarily large messages. gRPC 1.51 applies it only once a message is
  // in, so neither service lets gRPC read a request before the token check
  // (control_service.h, load_service.h).
  // Range-checked in ConfigFromFlags (1..1024 MiB), so the int cannot overflow.
  const int max_bytes = static_cast<int>(absl::GetFlag(FLAGS_max_message_mb) * kMiB);
  b.SetMaxReceiveMessageSize(max_bytes);
  b.SetMaxSendMessageSize(max_bytes);
  register_fn(&b);
  if (cq != nullptr) *cq = b.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  if (server == nullptr || *port == 0) {
    Die(absl::StrCat("cannot listen on ", address, " (--", flag, ")"));
  }
  return server;
}

// Process-wide settings made before any thread starts.
void TuneProcess() {
  InstallRateLimitedProtobufLog("rsslab_server");
  // Debian's Abseil is built with Mutex deadlock detection on, and gRPC
  // 1.51's own locks are absl::Mutex: the cycle bookkeeping
  // (GraphCycles::GetId & co.) showed in a profile of the server under the
  // seed workload. The server's own locks are never held two at a time,
  // so the check buys little; it is turned off before any thread starts.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC's default poller (epoll1) shares one epoll set between every
  // thread polling any completion queue, and hands the poller role from
  // thread to thread: the control server's threads and the workers
  // collecting answered calls took turns at the data plane's sockets,
  // waking each other once or twice per request. "poll" polls each queue's
  // own sockets, so the io thread alone serves the data plane: measured
  // here, 12 % less server CPU per seed request and a no-op request at 18-20
  // us instead of 41 (docs/BENCHMARKS.md, "Seed overhead"). An explicit
  // GRPC_POLL_STRATEGY in the environment wins.
  setenv("GRPC_POLL_STRATEGY", "poll", /*overwrite=*/0);
}

// Blocks the stop signals in the calling thread, and so in every thread
// started after it (gRPC's and Python's inherit the mask); StopSignals
// takes them with sigwait.
sigset_t BlockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  return stop;
}

// Everything the command line decides, checked.
struct Config {
  ServerCore::Options core;
  absl::Duration grace;  // --shutdown_grace_ms
  std::string data_addr;
  std::string control_addr;
  HostPort data_hp;
  HostPort control_hp;
  std::string metrics_addr;  // empty: no metrics endpoint
  Security security;
};

// Every number is range-checked before it is converted or used; the
// message names the flag and the allowed range (exit 2).
ServerCore::Options CoreOptionsFromFlags() {
  ServerCore::Options o;
  o.threads = absl::GetFlag(FLAGS_threads);
  Need(CheckRange(o.threads, "--threads", Lo("threads"), Hi("threads")));
  o.handler_path = absl::GetFlag(FLAGS_handler);
  if (o.handler_path.empty()) o.handler_path = DefaultHandler();
  absl::StatusOr<std::map<std::string, std::string>> params =
      ParseHandlerParams(absl::GetFlag(FLAGS_handler_params));
  if (!params.ok()) DieUsage(absl::StrCat("--handler_params: ", params.status().message()));
  o.handler_params = *std::move(params);
  const int64_t max_mb = absl::GetFlag(FLAGS_max_cache_limit_mb);
  o.cache_ceiling =
      max_mb == 0 ? MemTotalCeiling()
                  : CacheCeiling{Need(MiBToBytes(max_mb, "--max_cache_limit_mb",
                                                 Lo("max_cache_limit_mb"), Hi("max_cache_limit_mb"))),
                                 "--max_cache_limit_mb"};
  o.cache_limit_bytes = Need(MiBToBytes(absl::GetFlag(FLAGS_cache_limit_mb), "--cache_limit_mb", 0,
                                        BytesToMiB(o.cache_ceiling.bytes)));
  o.churn_every = absl::GetFlag(FLAGS_churn_every);
  Need(CheckRange(o.churn_every, "--churn_every", Lo("churn_every"), Hi("churn_every")));
  o.churn_overlap = Need(MsToDuration(absl::GetFlag(FLAGS_churn_overlap_ms), "--churn_overlap_ms",
                                      Lo("churn_overlap_ms"), Hi("churn_overlap_ms")));
  o.stuck_after = Need(MsToDuration(absl::GetFlag(FLAGS_stuck_after_ms), "--stuck_after_ms",
                                    Lo("stuck_after_ms"), Hi("stuck_after_ms")));
  o.handler_budget =
      Need(MsToDuration(absl::GetFlag(FLAGS_handler_budget_ms), "--handler_budget_ms",
                        Lo("handler_budget_ms"), Hi("handler_budget_ms")));
  return o;
}

// The listen addresses and the credentials: a malformed address, a bad
// credential file or an unprotected non-loopback address exits 2, a taken
// port 1.
void AddressesFromFlags(Config* config) {
  Config& c = *config;
  c.data_addr = absl::GetFlag(FLAGS_listen);
  c.control_addr = absl::GetFlag(FLAGS_control_listen);
  absl::StatusOr<HostPort> data_hp = ParseHostPort(c.data_addr);
  if (!data_hp.ok()) DieUsage(absl::StrCat(data_hp.status().message(), " (--listen)"));
  c.data_hp = *std::move(data_hp);
  absl::StatusOr<HostPort> control_hp = ParseHostPort(c.control_addr);
  if (!control_hp.ok()) {
    DieUsage(absl::StrCat(control_hp.status().message(), " (--control_listen)"));
  }
  c.control_hp = *std::move(control_hp);
  absl::StatusOr<Security> security = Security::FromFlags();
  if (!security.ok()) DieUsage(std::string(security.status().message()));
  c.security = *std::move(security);
  // Fail on a taken port or an unprotected non-loopback address before the
  // (slower) interpreter start.
  for (auto [flag, addr] : {std::pair<const char*, std::string>{"listen", c.data_addr},
                            {"control_listen", c.control_addr}}) {
    absl::Status s = c.security.CheckListen(addr, flag);
    if (!s.ok()) DieUsage(std::string(s.message()));
    s = CheckBindable(addr);
    if (!s.ok()) Die(absl::StrCat(s.message(), " (--", flag, ")"));
  }

  // The metrics port is checked with the others, before the interpreter.
  c.metrics_addr = metrics::DefaultToLoopback(absl::GetFlag(FLAGS_metrics_listen));
  if (!c.metrics_addr.empty()) {
    absl::Status s = CheckBindable(c.metrics_addr);
    if (!s.ok()) Die(absl::StrCat(s.message(), " (--metrics_listen)"));
  }
}

// All flags, checked in a fixed order (the first bad one on a command line
// is the one reported).
Config ConfigFromFlags() {
  Config c;
  c.core = CoreOptionsFromFlags();
  ServerCore::Options& o = c.core;
  Need(CheckRange(absl::GetFlag(FLAGS_max_message_mb), "--max_message_mb", Lo("max_message_mb"),
                  Hi("max_message_mb"), " (MiB)"));
  Need(CheckRange(absl::GetFlag(FLAGS_max_watch_streams), "--max_watch_streams",
                  Lo("max_watch_streams"), Hi("max_watch_streams")));
  c.grace = Need(MsToDuration(absl::GetFlag(FLAGS_shutdown_grace_ms), "--shutdown_grace_ms",
                              Lo("shutdown_grace_ms"), Hi("shutdown_grace_ms")));
  absl::StatusOr<AutoTrimOptions::Mode> auto_mode =
      ParseAutoTrimMode(absl::GetFlag(FLAGS_auto_trim), "--auto_trim");
  if (!auto_mode.ok()) DieUsage(std::string(auto_mode.status().message()));
  o.auto_trim.mode = *auto_mode;
  // Each checked in the flag's unit before it is converted (no overflow).
  const int64_t gap_mb = absl::GetFlag(FLAGS_auto_trim_gap_mb);
  NeedAutoTrim("auto_trim_gap_mb", gap_mb);
  o.auto_trim.gap_bytes = gap_mb * kMiB;
  const int settle_ms = absl::GetFlag(FLAGS_auto_trim_settle_ms);
  NeedAutoTrim("auto_trim_settle_ms", settle_ms);
  o.auto_trim.settle = absl::Milliseconds(settle_ms);
  o.auto_trim.settle_fraction = absl::GetFlag(FLAGS_auto_trim_settle_fraction);
  NeedAutoTrim("auto_trim_settle_fraction", o.auto_trim.settle_fraction);
  NeedAutoTrim("auto_trim_interval_s", absl::GetFlag(FLAGS_auto_trim_interval_s));
  NeedAutoTrim("auto_trim_min_spacing_s", absl::GetFlag(FLAGS_auto_trim_min_spacing_s));
  o.auto_trim.interval = absl::Seconds(absl::GetFlag(FLAGS_auto_trim_interval_s));
  o.auto_trim.min_spacing = absl::Seconds(absl::GetFlag(FLAGS_auto_trim_min_spacing_s));
  o.trim_thread_stats = absl::GetFlag(FLAGS_trim_thread_stats);
  if (absl::Status s = ValidateAutoTrimOptions(o.auto_trim); !s.ok()) {
    DieUsage(std::string(s.message()));
  }
  // Parsed after the trim flags, in the fixed order (see above).
  const std::string thread_mode = absl::GetFlag(FLAGS_thread_mode);
  std::optional<ThreadMode> mode = ParseThreadMode(thread_mode);
  if (!mode) {
    DieUsage(absl::StrCat("--thread_mode must be fixed or churn, got '", thread_mode, "'"));
  }
  o.thread_mode = *mode;
  AddressesFromFlags(&c);
  return c;
}

// Starts the interpreter and the workers.
std::unique_ptr<ServerCore> CreateCore(const ServerCore::Options& o) {
  absl::StatusOr<std::unique_ptr<ServerCore>> core = ServerCore::Create(o);
  if (!core.ok()) {
    // A handler file that is not a regular file (or too large) is a usage
    // error like any bad flag; one that fails to import is the handler's.
    if (absl::IsInvalidArgument(core.status()) && absl::StartsWith(core.status().message(), "--")) {
      DieUsage(std::string(core.status().message()));
    }
    Die(std::string(core.status().message()));
  }
  return *std::move(core);
}

// The data plane, the control plane and the metrics endpoint, serving from
// construction until Shutdown. Members are declared in start order, so they
// are destroyed in reverse (the services before the core they call).
class Serving {
 public:
  // `config` must outlive this (the services keep its Security).
  Serving(std::unique_ptr<ServerCore> core, const Config& config)
      : core_(std::move(core)),
        load_(core_.get(), &config.security),
        control_(core_->control(), absl::GetFlag(FLAGS_max_watch_streams), &config.security) {
    int data_port = 0, control_port = 0;
    std::unique_ptr<grpc::ServerCompletionQueue> load_cq;
    data_server_ = Listen(
        "listen", config.data_addr, config.security,
        [this](grpc::ServerBuilder* b) { load_.Register(b); }, &data_port, &load_cq);
    load_.Start(std::move(load_cq));
    control_server_ = Listen(
        "control_listen", config.control_addr, config.security,
        [this](grpc::ServerBuilder* b) { b->RegisterService(&control_); }, &control_port);
    ready_.data_address = JoinHostPort(config.data_hp.host, data_port);
    ready_.control_address = JoinHostPort(config.control_hp.host, control_port);
    ready_.pid = getpid();
    core_->set_addresses(ready_.data_address, ready_.control_address);
    if (!config.metrics_addr.empty()) {
      ServerCore* c = core_.get();
      auto m = metrics::MetricsHttpServer::Start(config.metrics_addr,
                                                 [c] { return metrics::ServerMetricsText(c); });
      if (!m.ok()) Die(absl::StrCat(m.status().message(), " (--metrics_listen)"));
      metrics_http_ = std::move(*m);
      ready_.metrics_address = metrics_http_->address();
    }
  }

  std::string FormattedReadyLine() const { return FormatReadyLine(ready_); }

  // After a stop signal: lets in-flight calls finish for up to `grace`, then
  // stops everything. Returns the exit code, or exits kExitStuck itself when
  // a call or the shutdown does not finish in time.
  int Shutdown(int sig, absl::Duration grace) {
    fprintf(stderr, "rsslab_server: %s received, finishing in-flight calls\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT");
    // The whole shutdown is bounded, whatever hangs (a handler that never
    // returns holds its worker, and with it gRPC's Shutdown, the pool's join
    // and Py_FinalizeEx): past grace + slack the process exits anyway.
    absl::Notification finished;
    ServerCore* c = core_.get();
    std::thread watchdog([&finished, c, grace] {
      if (finished.WaitForNotificationWithTimeout(grace + kShutdownSlack)) return;
      fprintf(stderr,
              "rsslab_server: shutdown still not finished %s after the grace period; busy "
              "workers: %s; exiting\n",
              absl::FormatDuration(kShutdownSlack).c_str(), c->BusyWorkers().c_str());
      fflush(stderr);
      _exit(kExitStuck);
    });
    // Stop accepting and let in-flight calls finish (they need the workers,
    // which are still running), then stop the control plane, the workers and
    // the interpreter, in that order.
    // Drain at our level first: gRPC's Shutdown(deadline) also waits out
    // idle client connections, which would delay every exit by seconds.
    int64_t left = core_->Drain(grace);
    if (left > 0) {
      // A Python thread cannot be stopped from outside, and waiting for it
      // is what made the server unkillable but by SIGKILL.
      fprintf(stderr,
              "rsslab_server: %ld calls still running after the grace period (%s); busy workers: "
              "%s; exiting without them\n",
              static_cast<long>(left), absl::FormatDuration(grace).c_str(),
              core_->BusyWorkers().c_str());
      fflush(stderr);
      _exit(kExitStuck);
    }
    control_.StopWatches();
    data_server_->Shutdown(std::chrono::system_clock::now());
    control_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    data_server_->Wait();
    control_server_->Wait();
    // Scrapes take snapshots of the core: stop them first.
    if (metrics_http_) metrics_http_->Stop();
    core_->Shutdown();
    // After the workers are gone: none can answer a call into the queue now.
    load_.Stop();
    finished.Notify();
    watchdog.join();
    fprintf(stderr, "rsslab_server: stopped\n");
    return 0;
  }

 private:
  std::unique_ptr<ServerCore> core_;
  LoadService load_;
  ControlService control_;
  std::unique_ptr<grpc::Server> data_server_;
  std::unique_ptr<grpc::Server> control_server_;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_http_;
  ReadyLine ready_;
};

}  // namespace

int RunServer(int argc, char** argv, const ServerProgram& program) {
  ParseFlags(argc, argv);
  TuneProcess();
  // From here on a stop signal is answered at every stage (StopSignals).
  StopSignals signals(BlockStopSignals());
  Config config = ConfigFromFlags();
  if (program.configure) Need(program.configure(&config.core));
  Serving serving(CreateCore(config.core), config);
  signals.SetReady();
  printf("%s\n", serving.FormattedReadyLine().c_str());
  fflush(stdout);
  return serving.Shutdown(signals.Wait(), config.grace);
}

}  // namespace rsslab
