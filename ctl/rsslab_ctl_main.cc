// rsslab_ctl: one-off calls to a running server's Control service.
//
//   rsslab_ctl --control=127.0.0.1:50052 phase fill [--cache_limit_mb=100]
//   rsslab_ctl snapshot [--json] [--gc] [--detail]
//   rsslab_ctl watch --interval=1s [--json] [--count=N]
//   rsslab_ctl trim [--mode=default|global|per_thread|purge] [--json]
//   rsslab_ctl inspect PID [--json] [--watch=10s [--count=N] [--metrics_listen=ADDR]]
//   rsslab_ctl --control=all:NAME workers|snapshot|trim|phase ...   every worker of a service
//   rsslab_ctl --control=pid:PID snapshot ...                        one registered worker
//   rsslab_ctl --control=all:NAME --as_user=svc workers              svc's workers too

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "ctl/inspect_cli.h"
#include "registry/registry.h"
#include "registry/registry_flags.h"
#include "ctl/snapshot_text.h"
#include "grpcpp/grpcpp.h"
#include "proto/control.grpc.pb.h"
#include "common/trim_modes.h"
#include "common/flags_parse.h"
#include "common/auth.h"
#include "common/untrusted_text.h"
#include "common/pid.h"
#include "common/units.h"

ABSL_FLAG(std::string, control, "127.0.0.1:50052",
          "Server's control address HOST:PORT; all:NAME every live worker of the package's service "
          "NAME (its registry entries), pid:PID one registered worker (only entries of this "
          "user's processes, or of --as_user's).");
ABSL_FLAG(int64_t, cache_limit_mb, -1, "phase: cache limit in MiB (default: fill 100, shrink 10, others unchanged).");
ABSL_FLAG(bool, json, false, "Print protobuf JSON (proto field names), one object per line.");
ABSL_FLAG(bool, gc, false, "snapshot/watch/trim: run gc.collect() first (phase always does unless --nophase_gc).");
ABSL_FLAG(bool, phase_gc, true, "phase: run gc.collect() before the snapshot.");
ABSL_FLAG(bool, detail, false, "Include the largest mappings and every worker.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "watch: time between snapshots.");
ABSL_FLAG(int, count, 0, "watch: stop after this many snapshots (0 = until interrupted).");
ABSL_FLAG(std::string, mode, "default",
          "trim: default (global + per-thread), global, per_thread, purge (the default, then "
          "each worker's free-block purge on mimalloc).");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60), "Deadline for one call.");
ABSL_FLAG(std::string, pid, "",
          "inspect: the process to inspect (same user or root); decimal digits only. "
          "`inspect PID` is the same.");
ABSL_FLAG(absl::Duration, watch, absl::ZeroDuration(),
          "inspect: after the report, sample RSS, threads and arenas this often (--count samples).");
ABSL_FLAG(std::string, metrics_listen, "",
          "inspect --watch: serve the samples as Prometheus gauges on HOST:PORT (/metrics).");
ABSL_FLAG(absl::Duration, batch_window, absl::Milliseconds(50),
          "inspect: threads started at most this far apart form one creation batch.");
ABSL_FLAG(double, growth_threshold_mb, 8,
          "inspect --watch: flag a sample whose RSS grew more than this since the previous one.");

namespace rsslab {
namespace {

// Whom a command is sent to: the --control address, or one worker of a
// service (`many`: print one line per worker).
struct Target {
  registry::Entry worker;
  bool many = false;
};

std::string Who(const Target& t) {
  return t.worker.pid == 0 ? absl::StrCat("server at ", t.worker.address)
                           : absl::StrCat("worker ", registry::WorkerName(t.worker));
}

// The prefix of a worker's line ("pid 12 at 127.0.0.1:5: ").
std::string LinePrefix(const Target& t) {
  return t.many ? absl::StrCat(registry::WorkerName(t.worker), ": ") : "";
}

int Fail(const Target& t, const std::string& what, const grpc::Status& s) {
  const std::string who = Who(t);
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    fprintf(stderr, "rsslab_ctl: %s: cannot reach %s (%s)\n", Echo(what).c_str(),
            Echo(who).c_str(), Echo(s.error_message()).c_str());
  } else if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // What answers there is a gRPC server without the Control service:
    // most likely the data port (or an agent).
    fprintf(stderr,
            "rsslab_ctl: %s: %s does not serve rsslab's Control service (is it the server's data "
            "port, or another program?); --control takes the address after control= in the "
            "server's ready line\n",
            Echo(what).c_str(), Echo(who).c_str());
  } else {
    // The server's text, not ours: escaped and cut (a peer could forge lines).
    const std::string whose = t.worker.pid == 0 ? "" : absl::StrCat(Echo(who), ": ");
    fprintf(stderr, "rsslab_ctl: %s: %s%s: %s\n", Echo(what).c_str(), whose.c_str(),
            absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())).c_str(),
            Echo(s.error_message(), 1024).c_str());
  }
  return 1;
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + absl::GetFlag(FLAGS_timeout)));
}

// The one table of names (common/trim_modes.h).
bool ParseMode(const std::string& m, rsslab::v1::TrimMode* out) {
  std::optional<rsslab::v1::TrimMode> mode = ParseTrimModeName(m);
  if (!mode) return false;
  *out = *mode;
  return true;
}

// The trim modes' names come from their one table (common/trim_modes.h).
std::string Usage() {
  return absl::StrCat(
    "rsslab_ctl [--control=HOST:PORT|all:NAME|pid:PID [--as_user=USER,...]] COMMAND\n"
    "  phase fill|shrink|idle|trim [--cache_limit_mb=N]   switch phase, print the snapshot\n"
    "  snapshot [--json] [--gc] [--detail]              one snapshot\n"
    "  watch [--interval=1s] [--count=N] [--json]       a snapshot every interval\n"
    "  trim [--mode=", TrimModeAlternatives(), "]    release free memory now\n"
    "  workers                                          --control=all:NAME: the service's live workers\n"
    "  inspect PID [--json] [--watch=10s [--count=N] [--metrics_listen=ADDR]]   (or --pid=PID)\n"
    "                                                   any process from outside: threads, memory,\n"
    "                                                   allocator, environment, diagnosis");
}

using Args = std::vector<char*>;
using Stub = rsslab::v1::Control::Stub;

// Prints the first failed check; returns 2 (usage error) or 0.
int FirstFailure(const std::vector<absl::Status>& checks, const char* prefix) {
  for (const absl::Status& s : checks) {
    if (!s.ok()) {
      fprintf(stderr, "rsslab_ctl: %s%s\n", prefix, std::string(s.message()).c_str());
      return 2;
    }
  }
  return 0;
}

// Every number is checked before anything is sent (exit 2).
int CheckCommonFlags() {
  const int64_t mb = absl::GetFlag(FLAGS_cache_limit_mb);
  std::vector<absl::Status> checks = {
      CheckRange(absl::GetFlag(FLAGS_count), "--count", 0, 1 << 30),
      CheckDuration(absl::GetFlag(FLAGS_interval), "--interval", absl::Milliseconds(10),
                    absl::Hours(24)),
      CheckDuration(absl::GetFlag(FLAGS_timeout), "--timeout", absl::Milliseconds(1),
                    absl::Hours(24)),
  };
  if (mb != -1) checks.push_back(MiBToBytes(mb, "--cache_limit_mb", 0, kMaxMiB).status());
  return FirstFailure(checks, "");
}

// Reads /proc only: no channel, no credentials.
int InspectCommand(const Args& args) {
  InspectCliOptions o;
  // The pid as `inspect PID` or `inspect --pid=PID`, once. A string either
  // way: the int flag's parser takes " 5" and "0x10" as 5 and 16.
  if (args.size() > 3 || (args.size() == 3 && !absl::GetFlag(FLAGS_pid).empty())) {
    fprintf(stderr, "rsslab_ctl: inspect takes one process id: inspect PID or inspect --pid=PID\n");
    return 2;
  }
  absl::StatusOr<int> pid = args.size() == 3 ? ParsePid(args[2], "inspect PID")
                                             : ParsePid(absl::GetFlag(FLAGS_pid), "--pid");
  o.json = absl::GetFlag(FLAGS_json);
  o.watch = absl::GetFlag(FLAGS_watch);
  o.count = absl::GetFlag(FLAGS_count);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.growth_threshold_mb = absl::GetFlag(FLAGS_growth_threshold_mb);
  o.report.batch_window = absl::GetFlag(FLAGS_batch_window);
  std::vector<absl::Status> checks = {
      pid.status(),
      CheckDuration(o.report.batch_window, "--batch_window", absl::Milliseconds(1),
                    absl::Seconds(60)),
      CheckRange(o.growth_threshold_mb, "--growth_threshold_mb", 0.0, 1e6),
  };
  if (o.watch != absl::ZeroDuration()) {
    checks.push_back(CheckDuration(o.watch, "--watch", absl::Milliseconds(100), absl::Hours(24)));
  }
  if (int rc = FirstFailure(checks, "inspect: "); rc != 0) return rc;
  o.pid = *pid;
  if (!o.metrics_listen.empty() && o.watch == absl::ZeroDuration()) {
    fprintf(stderr, "rsslab_ctl: inspect: --metrics_listen needs --watch=INTERVAL (how often to sample)\n");
    return 2;
  }
  return RunInspect(o);
}

bool ModeFromFlag(rsslab::v1::TrimMode* mode) {
  if (ParseMode(absl::GetFlag(FLAGS_mode), mode)) return true;
  fprintf(stderr, "rsslab_ctl: --mode must be %s\n", TrimModeNames().c_str());
  return false;
}

int PhaseCommand(Stub& stub, const Args& args, const Target& t) {
  if (args.size() != 3) {
    fprintf(stderr, "rsslab_ctl: usage: phase fill|shrink|idle|trim [--cache_limit_mb=N]\n");
    return 2;
  }
  rsslab::v1::SetPhaseRequest req;
  req.set_phase(args[2]);
  int64_t mb = absl::GetFlag(FLAGS_cache_limit_mb);
  if (mb != -1) req.set_cache_limit_bytes(*MiBToBytes(mb, "--cache_limit_mb", 0, kMaxMiB));
  req.set_gc(absl::GetFlag(FLAGS_phase_gc));
  req.set_detail(absl::GetFlag(FLAGS_detail));
  rsslab::v1::TrimMode mode;
  if (!ModeFromFlag(&mode)) return 2;
  req.set_trim_mode(mode);
  rsslab::v1::SetPhaseResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.SetPhase(&ctx, req, &resp);
  if (!s.ok()) return Fail(t, "phase " + req.phase(), s);
  if (absl::GetFlag(FLAGS_json)) {
    PrintJsonLine(resp);
  } else if (t.many) {
    printf("%sphase %s -> %s  %s", LinePrefix(t).c_str(), Echo(resp.previous_phase()).c_str(),
           Echo(req.phase()).c_str(), SnapshotLine(resp.snapshot()).c_str());
  } else {
    printf("phase %s -> %s\n", Echo(resp.previous_phase()).c_str(), Echo(req.phase()).c_str());
    if (!resp.no_callback().empty()) {
      printf("no callback ran: %s\n", rsslab::Echo(resp.no_callback(), 1024).c_str());
    }
    if (resp.has_trim()) printf("trim %s", TrimText(resp.trim()).c_str());
    printf("%s", SnapshotText(resp.snapshot()).c_str());
  }
  return 0;
}

int SnapshotCommand(Stub& stub, const Target& t) {
  rsslab::v1::SnapshotRequest req;
  req.set_gc(absl::GetFlag(FLAGS_gc));
  req.set_detail(absl::GetFlag(FLAGS_detail));
  rsslab::v1::Snapshot snap;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.GetSnapshot(&ctx, req, &snap);
  if (!s.ok()) return Fail(t, "snapshot", s);
  if (absl::GetFlag(FLAGS_json)) {
    PrintJsonLine(snap);
  } else if (t.many) {
    printf("%s%s", LinePrefix(t).c_str(), SnapshotLine(snap).c_str());
  } else {
    printf("%s", SnapshotText(snap).c_str());
  }
  return 0;
}

int WatchCommand(Stub& stub, const Target& t) {
  rsslab::v1::WatchRequest req;
  req.set_interval_ms(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_interval)));
  req.set_gc(absl::GetFlag(FLAGS_gc));
  req.set_detail(absl::GetFlag(FLAGS_detail));
  req.set_max_count(absl::GetFlag(FLAGS_count));
  grpc::ClientContext ctx;
  auto reader = stub.WatchSnapshots(&ctx, req);
  rsslab::v1::Snapshot snap;
  const bool json = absl::GetFlag(FLAGS_json);
  while (reader->Read(&snap)) {
    if (json) {
      PrintJsonLine(snap);
    } else {
      printf("%s", SnapshotLine(snap).c_str());
      fflush(stdout);
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return Fail(t, "watch", s);
  return 0;
}

int TrimCommand(Stub& stub, const Target& t) {
  rsslab::v1::TrimRequest req;
  rsslab::v1::TrimMode mode;
  if (!ModeFromFlag(&mode)) return 2;
  req.set_mode(mode);
  req.set_gc(absl::GetFlag(FLAGS_gc));
  rsslab::v1::TrimResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = stub.Trim(&ctx, req, &resp);
  if (!s.ok()) return Fail(t, "trim", s);
  if (absl::GetFlag(FLAGS_json)) {
    PrintJsonLine(resp);
  } else if (t.many) {
    // TrimText's first line holds the figures; the rest is per thread.
    const std::string text = TrimText(resp.trim());
    printf("%strim %s\n", LinePrefix(t).c_str(), text.substr(0, text.find('\n')).c_str());
  } else {
    printf("trim %s", TrimText(resp.trim()).c_str());
  }
  return 0;
}

// Says what the registry ignored, one line each (stale entries it removed
// say so).
void PrintIgnored(const std::vector<registry::Ignored>& ignored) {
  for (const registry::Ignored& i : ignored) {
    fprintf(stderr, "rsslab_ctl: ignored %s: %s%s\n", Echo(i.path).c_str(), Echo(i.why).c_str(),
            i.removed ? " (removed)" : "");
  }
}

int WorkersCommand(const std::vector<registry::Entry>& workers) {
  for (const registry::Entry& w : workers) {
    printf("%s service %s start %llu\n", registry::WorkerName(w).c_str(), w.service.c_str(),
           static_cast<unsigned long long>(w.start_ticks));
  }
  return 0;
}

// Every worker the spec names gets the command; one failing does not stop
// the others, and the exit status says whether any failed, naming them.
int ControlCommands(const std::string& cmd, const Args& args, const registry::ControlSpec& spec,
                    const registry::Trust& trust, const Security& security) {
  std::vector<registry::Ignored> ignored;
  absl::StatusOr<std::vector<registry::Entry>> workers = registry::Resolve(spec, trust, &ignored);
  PrintIgnored(ignored);
  if (!workers.ok()) {
    fprintf(stderr, "rsslab_ctl: %s\n", std::string(workers.status().message()).c_str());
    return 1;
  }
  if (cmd == "workers") return WorkersCommand(*workers);
  std::vector<std::string> failed;
  for (const registry::Entry& w : *workers) {
    Target t{w, spec.kind == registry::ControlSpec::Kind::kService};
    auto stub = rsslab::v1::Control::NewStub(security.Channel(w.address));
    int rc = cmd == "phase"      ? PhaseCommand(*stub, args, t)
             : cmd == "snapshot" ? SnapshotCommand(*stub, t)
             : cmd == "watch"    ? WatchCommand(*stub, t)
                                 : TrimCommand(*stub, t);
    if (rc == 2) return rc;  // a usage error: found before anything was sent
    if (rc != 0) failed.push_back(registry::WorkerName(w));
    fflush(stdout);
  }
  if (!failed.empty() && workers->size() > 1) {
    fprintf(stderr, "rsslab_ctl: %s failed on %zu of %zu workers: %s\n", cmd.c_str(),
            failed.size(), workers->size(), absl::StrJoin(failed, ", ").c_str());
  }
  return failed.empty() ? 0 : 1;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Usage());
  Args args = ParseFlags(argc, argv);
  if (args.size() < 2) {
    fprintf(stderr, "rsslab_ctl: missing command (phase, snapshot, watch, trim, inspect); see --help\n");
    return 2;
  }
  const std::string cmd = args[1];
  if (int rc = CheckCommonFlags(); rc != 0) return rc;
  if (cmd == "inspect") return InspectCommand(args);
  if (cmd != "phase" && cmd != "snapshot" && cmd != "watch" && cmd != "trim" && cmd != "workers") {
    fprintf(stderr,
            "rsslab_ctl: unknown command '%s' (phase, snapshot, watch, trim, workers, inspect)\n",
            Echo(cmd, 64).c_str());
    return 2;
  }
  absl::StatusOr<registry::ControlSpec> spec =
      registry::ParseControlSpec(absl::GetFlag(FLAGS_control));
  if (!spec.ok()) {
    fprintf(stderr, "rsslab_ctl: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  const auto kind = spec->kind;
  if (cmd == "workers" && kind != registry::ControlSpec::Kind::kService) {
    fprintf(stderr, "rsslab_ctl: workers lists a service's workers: --control=all:NAME\n");
    return 2;
  }
  if (cmd == "watch" && kind == registry::ControlSpec::Kind::kService) {
    fprintf(stderr, "rsslab_ctl: watch follows one process: --control=pid:PID or HOST:PORT "
                    "(rsslab_ctl --control=all:NAME workers lists them)\n");
    return 2;
  }
  absl::StatusOr<registry::Trust> trust = registry::TrustFromFlags();
  if (!trust.ok()) {
    fprintf(stderr, "rsslab_ctl: %s\n", std::string(trust.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<Security> security = Security::FromFlags();
  if (!security.ok()) {
    fprintf(stderr, "rsslab_ctl: %s\n", std::string(security.status().message()).c_str());
    return 2;
  }
  return ControlCommands(cmd, args, *spec, *trust, *security);
}

}  // namespace
}  // namespace rsslab

int main(int argc, char** argv) { return rsslab::Main(argc, argv); }
