// rsslab_loadgen: drives an rsslab_server over gRPC and scripts its phases.
//
//   rsslab_loadgen --builtin=seed --scale=0.1 --target=HOST:PORT --control=HOST:PORT
//   rsslab_loadgen --scenario=my.txtpb
//   rsslab_loadgen --requests=100000 --concurrency=64 --channels=4   (one load step)
//   rsslab_loadgen --rate=2000 --arrival=poisson --duration=30s      (open loop)
//   rsslab_loadgen --builtin=soak --duration=4h   (cycles + watch stream)
//   rsslab_loadgen report RUN_DIR [RUN_DIR...]   (rebuild summaries from events.jsonl)
//   rsslab_loadgen --builtin=sweep --agent=HOST:PORT [--profiles=glibc,jemalloc]
//       [--threads_list=1,4] [--repeats=N] [--scale=0.1]   (seed 000's matrix)
//   rsslab_loadgen ... the same sweep command ... --out=DIR --resume
//       (continue a sweep that was killed: only the cells not yet done run)
//
// Exit status: 0 when every step succeeded, 1 when a step or the run
// failed, 2 for bad input (nothing was sent), 130 when interrupted.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/handler_params.h"
#include "common/metrics/http_server.h"
#include "loadgen/engine.h"
#include "loadgen/event_log.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/plan.h"
#include "loadgen/progress_line.h"
#include "loadgen/report_tool.h"
#include "loadgen/resume.h"
#include "loadgen/runner.h"
#include "loadgen/scenario.h"
#include "loadgen/summary.h"
#include "loadgen/summary_render.h"
#include "loadgen/sweep.h"
#include "loadgen/sweep_summary.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "Server data address (Load service).");
ABSL_FLAG(std::string, control, "127.0.0.1:50052",
          "Server control address (Control service); empty for load-only runs.");
ABSL_FLAG(std::string, scenario, "", "Scenario file (protobuf text format, proto/scenario.proto).");
ABSL_FLAG(std::string, builtin, "", "Built-in scenario: seed (seed 000 exactly), quick (smoke cycle), sweep (seed 000's matrix, needs --agent) or soak (cycles for --duration, e.g. --duration=4h).");
ABSL_FLAG(std::string, print_builtin, "", "Print a built-in scenario's text and exit.");
ABSL_FLAG(double, scale, 0, "Multiply every step's request count by this (default 1).");
ABSL_FLAG(std::string, out, "", "Run directory (default results/<UTC time>-<scenario>/).");
ABSL_FLAG(uint32_t, concurrency, 0, "Closed loop: RPCs in flight (default 64).");
ABSL_FLAG(uint32_t, channels, 0, "Separate HTTP/2 connections to spread RPCs over (default 4).");
ABSL_FLAG(double, rate, 0, "Open loop: requests per second (excludes --concurrency).");
ABSL_FLAG(std::string, arrival, "", "Open loop arrivals: constant (default) or poisson.");
ABSL_FLAG(uint32_t, max_outstanding, 0, "Open loop: cap on RPCs in flight (default 10000); sends held back count as late.");
ABSL_FLAG(uint64_t, requests, 0, "Measured requests per load step (excludes --duration).");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(), "Measured time per load step, e.g. 30s (excludes --requests); for a soak, the soak's length, e.g. 4h.");
ABSL_FLAG(absl::Duration, warmup, absl::ZeroDuration(), "Warm-up time per load step, excluded from the statistics.");
ABSL_FLAG(uint64_t, warmup_requests, 0, "Warm-up requests per load step, excluded from the statistics.");
ABSL_FLAG(uint32_t, deadline_ms, 0, "Per-RPC deadline in ms (default 10000).");
ABSL_FLAG(uint64_t, seed, 0, "Request seed sequence (default 1): the same seed sends the same requests.");
ABSL_FLAG(std::string, params, "", "Handler params for every request, k=v,k=v.");
ABSL_FLAG(uint32_t, payload_bytes, 0, "Payload bytes per request.");
ABSL_FLAG(bool, return_body, false, "Ask the server to return bodies.");
ABSL_FLAG(uint64_t, max_errors, 0, "A load step fails (and stops) once more RPCs than this failed.");
ABSL_FLAG(std::string, client_api, "callback",
          "Closed loop: gRPC client API driving the RPCs, callback (default: completions on gRPC's "
          "threads, calls finished together leave in one write) or cq (completion queues on "
          "--client_threads threads). The open loop always uses cq.");
ABSL_FLAG(int, client_threads, 0, "Completion-queue threads driving the RPCs (default: one per channel, at most max(4, 2 x CPUs the loadgen may run on)).");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(5), "How long to wait for the server to accept connections.");
ABSL_FLAG(absl::Duration, control_timeout, absl::Seconds(60), "Deadline of each control RPC (phase, snapshot, trim).");
ABSL_FLAG(std::string, progress, "auto", "auto (live line on a TTY, else a line per step), live, lines or none.");
ABSL_FLAG(bool, fsync, false, "fsync events.jsonl after every record (flushed always).");
ABSL_FLAG(std::string, agent, "",
          "Sweeps: rsslab_agent address (HOST:PORT) that launches each cell's server.");
ABSL_FLAG(std::string, profiles, "", "Sweeps: profiles to run, comma-separated (replaces the scenario's).");
ABSL_FLAG(std::string, threads_list, "", "Sweeps: worker thread counts, comma-separated, e.g. 1,4,16,64.");
ABSL_FLAG(int, repeats, 0, "Sweeps: repeats per profile x threads (replaces the scenario's).");
ABSL_FLAG(std::string, metrics_listen, "",
          "Serve this run's progress as Prometheus metrics (HTTP GET /metrics) at HOST:PORT; a "
          "bare PORT means 127.0.0.1:PORT. Off when empty. No authentication: keep it on "
          "loopback or a network only the scraper reaches.");
ABSL_FLAG(absl::Duration, metrics_hold, absl::ZeroDuration(),
          "With --metrics_listen: after the run, keep serving the final values this long (e.g. "
          "60s, one scrape interval or more) so a scraper sees them; Ctrl-C ends it early.");
ABSL_FLAG(bool, resume, false,
          "Sweeps: continue the interrupted sweep in --out=DIR: same matrix and steps "
          "(checked against its header), cells with a successful result are kept, the rest "
          "run, the summary covers all of them.");
ABSL_FLAG(std::string, report_tool, "",
          "Sweeps: tools/report.py to run at the end (default: found next to this binary).");

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInterrupted = 130;

int Fail(int code, const std::string& msg) {
  for (absl::string_view line : absl::StrSplit(msg, '\n')) {
    fprintf(stderr, "rsslab_loadgen: %s\n", std::string(line).c_str());
  }
  return code;
}

// Plots and the "What to do" section, when python3 + matplotlib are here.
void SweepReport(const std::string& dir) {
  std::string tool = absl::GetFlag(FLAGS_report_tool);
  if (tool.empty()) tool = rsslab::FindReportTool();
  std::string output;
  absl::Status s = rsslab::RunReportTool(tool, dir, &output);
  if (!output.empty()) fprintf(stderr, "%s", output.c_str());
  if (!s.ok()) fprintf(stderr, "rsslab_loadgen: %s\n", std::string(s.message()).c_str());
}

// The per-cycle table and, when the server went away, when and what it
// looked like last.
void PrintSoak(const rsslab::SoakSummary& k) {
  printf("%s", rsslab::SoakText(k).c_str());
  fflush(stdout);
}

// `rsslab_loadgen report RUN_DIR...`: every summary rebuilt from events.jsonl.
int Report(const std::vector<std::string>& dirs) {
  std::vector<rsslab::RunSummary> runs;
  std::vector<std::string> run_dirs;
  for (const std::string& d : dirs) {
    int skipped = 0;
    auto events = rsslab::ReadEvents(d, &skipped);
    if (!events.ok()) return Fail(kExitFailed, std::string(events.status().message()));
    if (skipped > 0) {
      fprintf(stderr, "rsslab_loadgen: %s: skipped %d unreadable line(s)\n", d.c_str(), skipped);
    }
    if (rsslab::IsSweepRun(*events)) {
      rsslab::SweepSummary sw = rsslab::BuildSweepSummary(*events);
      if (auto s = rsslab::WriteSweepSummary(d, sw); !s.ok()) {
        return Fail(kExitFailed, std::string(s.message()));
      }
      printf("%s: sweep, %zu cells, %d failed\n%s", d.c_str(), sw.cells.size(),
             sw.failed_cells, rsslab::SweepTable(sw).c_str());
      SweepReport(d);
      continue;
    }
    rsslab::SummaryBuilder b;
    for (const auto& e : *events) b.Add(e);
    if (auto s = rsslab::WriteSummary(d, b.summary()); !s.ok()) {
      return Fail(kExitFailed, std::string(s.message()));
    }
    if (b.summary().soak.enabled) {
      PrintSoak(b.summary().soak);
      SweepReport(d);  // rss_over_time.png, post_idle_per_cycle.png
    }
    runs.push_back(b.summary());
    run_dirs.push_back(d);
  }
  if (!runs.empty()) printf("%s", rsslab::SummaryTable(runs, run_dirs).c_str());
  return 0;
}

// ---------------------------------------------------------------------------
// 1. The invocation: everything the command line asks for, checked. Every
// problem here is a usage error (exit 2) found before a port, a file or a
// connection is opened.

struct Invocation {
  std::vector<std::string> argv;
  rsslab::v1::LoadSpec flags;    // the command line's load layer
  rsslab::v1::Scenario scenario;  // after --duration (soak) and sweep overrides
  rsslab::Plan plan;              // its steps, resolved once
  rsslab::ProgressMode progress = rsslab::ProgressMode::kLines;
  rsslab::Security security;      // credentials, read
  bool resume = false;
  std::string out;                // the run directory
  std::string metrics_address;    // --metrics_listen, "" when off
};

absl::StatusOr<rsslab::v1::LoadSpec> FlagSpec() {
  std::vector<std::string> errs;
  const double rate = absl::GetFlag(FLAGS_rate);
  const uint32_t conc = absl::GetFlag(FLAGS_concurrency);
  if (rate < 0) errs.push_back("--rate must be positive");
  if (rate > 0 && conc > 0) {
    errs.push_back(
        "--rate (open loop: requests leave on a schedule) and --concurrency "
        "(closed loop: a fixed number in flight) cannot both hold; use "
        "--max_outstanding to cap an open loop");
  }
  if (absl::GetFlag(FLAGS_requests) > 0 &&
      absl::GetFlag(FLAGS_duration) > absl::ZeroDuration()) {
    errs.push_back("--requests and --duration are alternatives; set one");
  }
  if (absl::GetFlag(FLAGS_duration) < absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_warmup) < absl::ZeroDuration()) {
    errs.push_back("--duration and --warmup must be positive");
  }
  if (absl::GetFlag(FLAGS_warmup) > absl::ZeroDuration() &&
      absl::GetFlag(FLAGS_warmup_requests) > 0) {
    errs.push_back("--warmup and --warmup_requests are alternatives; set one");
  }
  if (absl::GetFlag(FLAGS_scale) < 0) errs.push_back("--scale must be positive");
  if (conc > 0 && absl::GetFlag(FLAGS_channels) > conc) {
    errs.push_back(absl::StrFormat(
        "--channels=%d exceeds --concurrency=%d: some channels would carry "
        "no RPC",
        absl::GetFlag(FLAGS_channels), conc));
  }
  if (conc > 0 && absl::GetFlag(FLAGS_max_outstanding) > 0) {
    errs.push_back("--max_outstanding caps an open loop (--rate); a closed "
                   "loop's in-flight count is --concurrency");
  }
  const std::string arrival = absl::GetFlag(FLAGS_arrival);
  if (!arrival.empty() && arrival != "constant" && arrival != "poisson") {
    errs.push_back(absl::StrFormat("--arrival=%s: use constant or poisson", arrival));
  }
  if (!arrival.empty() && conc > 0) {
    errs.push_back("--arrival applies to an open loop (--rate), not --concurrency");
  }
  rsslab::v1::LoadSpec s;
  s.set_rate(rate);
  s.set_concurrency(conc);
  s.set_channels(absl::GetFlag(FLAGS_channels));
  s.set_arrival(arrival);
  s.set_max_outstanding(absl::GetFlag(FLAGS_max_outstanding));
  s.set_requests(absl::GetFlag(FLAGS_requests));
  s.set_duration_s(absl::ToDoubleSeconds(absl::GetFlag(FLAGS_duration)));
  s.set_warmup_s(absl::ToDoubleSeconds(absl::GetFlag(FLAGS_warmup)));
  s.set_warmup_requests(absl::GetFlag(FLAGS_warmup_requests));
  s.set_deadline_ms(absl::GetFlag(FLAGS_deadline_ms));
  s.set_seed(absl::GetFlag(FLAGS_seed));
  s.set_payload_bytes(absl::GetFlag(FLAGS_payload_bytes));
  s.set_return_body(absl::GetFlag(FLAGS_return_body));
  s.set_scale(absl::GetFlag(FLAGS_scale));
  absl::StatusOr<std::map<std::string, std::string>> params =
      rsslab::ParseHandlerParams(absl::GetFlag(FLAGS_params));
  if (params.ok()) {
    for (const auto& [k, v] : *params) (*s.mutable_params())[k] = v;
  } else {
    errs.push_back(absl::StrCat("--params: ", params.status().message()));
  }
  if (!errs.empty()) return absl::InvalidArgumentError(absl::StrJoin(errs, "\n"));
  return s;
}

// The scenario the flags name, with the command line's changes applied.
absl::StatusOr<rsslab::v1::Scenario> SelectScenario(rsslab::v1::LoadSpec* flags) {
  const std::string scenario_file = absl::GetFlag(FLAGS_scenario);
  const std::string builtin = absl::GetFlag(FLAGS_builtin);
  if (!scenario_file.empty() && !builtin.empty()) {
    return absl::InvalidArgumentError("--scenario and --builtin are alternatives; set one");
  }
  absl::StatusOr<rsslab::v1::Scenario> scenario;
  if (!scenario_file.empty()) {
    scenario = rsslab::LoadScenarioFile(scenario_file, *flags);
  } else if (!builtin.empty()) {
    scenario = rsslab::BuiltinScenario(builtin, *flags);
  } else if (flags->requests() > 0 || flags->duration_s() > 0) {
    scenario = rsslab::AdHocScenario();
  } else {
    return absl::InvalidArgumentError(
        "nothing to run: give --builtin=seed|quick, --scenario=FILE, or "
        "--requests / --duration for a single load step (see --help)");
  }
  if (!scenario.ok()) return scenario.status();
  if (scenario->has_soak() && flags->duration_s() > 0) {
    // A soak's --duration is its length (hours), not each step's.
    rsslab::ApplySoakDuration(&*scenario, flags->duration_s());
    flags->clear_duration_s();
  }
  const bool overrides = !absl::GetFlag(FLAGS_profiles).empty() ||
                         !absl::GetFlag(FLAGS_threads_list).empty() ||
                         absl::GetFlag(FLAGS_repeats) != 0;
  if (overrides && !scenario->has_sweep()) {
    return absl::InvalidArgumentError(
        "--profiles, --threads_list and --repeats shape a sweep; use "
        "--builtin=sweep or a scenario with a sweep block");
  }
  if (scenario->has_sweep()) {
    if (auto s = rsslab::ApplySweepOverrides(&*scenario, absl::GetFlag(FLAGS_profiles),
                                             absl::GetFlag(FLAGS_threads_list),
                                             absl::GetFlag(FLAGS_repeats));
        !s.ok()) {
      return s;
    }
    if (absl::GetFlag(FLAGS_agent).empty()) {
      return absl::InvalidArgumentError(
          "a sweep launches a fresh server per cell through rsslab_agent: "
          "give --agent=HOST:PORT (see tools/sweep.sh)");
    }
  }
  return scenario;
}

absl::StatusOr<rsslab::ProgressMode> ProgressFlag() {
  const std::string progress = absl::GetFlag(FLAGS_progress);
  if (progress == "auto") {
    return isatty(STDERR_FILENO) ? rsslab::ProgressMode::kLive : rsslab::ProgressMode::kLines;
  }
  if (progress == "live") return rsslab::ProgressMode::kLive;
  if (progress == "lines") return rsslab::ProgressMode::kLines;
  if (progress == "none") return rsslab::ProgressMode::kNone;
  return absl::InvalidArgumentError(
      absl::StrFormat("--progress=%s: use auto, live, lines or none", progress));
}

// --client_api, --client_threads.
absl::Status CheckClientFlags() {
  if (absl::GetFlag(FLAGS_client_api) != "callback" && absl::GetFlag(FLAGS_client_api) != "cq") {
    return absl::InvalidArgumentError(
        absl::StrFormat("--client_api=%s: use callback or cq", absl::GetFlag(FLAGS_client_api)));
  }
  if (absl::GetFlag(FLAGS_client_threads) < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--client_threads=%d: use 0 (one per CPU) or a positive count",
                        absl::GetFlag(FLAGS_client_threads)));
  }
  return absl::OkStatus();
}

// --resume (a sweep or a soak, in its --out) and --metrics_hold.
absl::Status CheckResumeAndMetricsFlags(const rsslab::v1::Scenario& scenario) {
  if (absl::GetFlag(FLAGS_resume) && !scenario.has_sweep() && !scenario.has_soak()) {
    return absl::InvalidArgumentError(
        "--resume continues an interrupted sweep or soak (--builtin=sweep|soak or a "
        "scenario with a sweep or soak block); other runs start afresh in a new --out");
  }
  if (absl::GetFlag(FLAGS_resume) && absl::GetFlag(FLAGS_out).empty()) {
    return absl::InvalidArgumentError(
        "--resume continues the run in --out=DIR: give the interrupted run's --out");
  }
  if (absl::GetFlag(FLAGS_metrics_hold) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--metrics_hold must not be negative");
  }
  if (absl::GetFlag(FLAGS_metrics_hold) > absl::ZeroDuration() &&
      absl::GetFlag(FLAGS_metrics_listen).empty()) {
    return absl::InvalidArgumentError("--metrics_hold needs --metrics_listen");
  }
  return absl::OkStatus();
}

absl::StatusOr<Invocation> ParseInvocation(std::vector<std::string> argv) {
  Invocation inv;
  inv.argv = std::move(argv);
  absl::StatusOr<rsslab::v1::LoadSpec> flags = FlagSpec();
  if (!flags.ok()) return flags.status();
  inv.flags = *std::move(flags);
  absl::StatusOr<rsslab::v1::Scenario> scenario = SelectScenario(&inv.flags);
  if (!scenario.ok()) return scenario.status();
  inv.scenario = *std::move(scenario);
  // After every change to the scenario and the flags: the plan is what runs.
  absl::StatusOr<rsslab::Plan> plan = rsslab::BuildPlan(inv.scenario, inv.flags);
  if (!plan.ok()) return plan.status();
  inv.plan = *std::move(plan);
  absl::StatusOr<rsslab::ProgressMode> progress = ProgressFlag();
  if (!progress.ok()) return progress.status();
  inv.progress = *progress;
  if (absl::Status s = CheckClientFlags(); !s.ok()) return s;
  // Credentials are read before the run directory exists: a bad file is a
  // usage error with nothing written.
  absl::StatusOr<rsslab::Security> security = rsslab::Security::FromFlags();
  if (!security.ok()) return security.status();
  inv.security = *std::move(security);
  if (absl::Status s = CheckResumeAndMetricsFlags(inv.scenario); !s.ok()) return s;
  inv.resume = absl::GetFlag(FLAGS_resume);
  inv.metrics_address = rsslab::metrics::DefaultToLoopback(absl::GetFlag(FLAGS_metrics_listen));
  inv.out = absl::GetFlag(FLAGS_out);
  if (inv.out.empty()) {
    inv.out = absl::StrCat("results/",
                           absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()),
                           "-", inv.scenario.name().empty() ? "run" : inv.scenario.name());
  }
  return inv;
}

// ---------------------------------------------------------------------------
// 2. Opening: the metrics port, then the run directory (new, or the
// interrupted run's for --resume) with its first records.

// --metrics_listen: the run's progress for a Prometheus scraper.
struct Metrics {
  rsslab::LoadgenMetrics values;
  std::unique_ptr<rsslab::metrics::MetricsHttpServer> http;  // null when off
};

// Opened before the run directory exists: a taken port is a usage error with
// nothing written or sent.
int OpenMetrics(const Invocation& inv, Metrics* metrics) {
  if (inv.metrics_address.empty()) return 0;
  rsslab::metrics::MetricsHttpServer::Options mo;
  mo.thread_name = "lg-metrics";
  auto m = rsslab::metrics::MetricsHttpServer::Start(
      inv.metrics_address, [metrics] { return metrics->values.Text(); }, mo);
  if (!m.ok()) return Fail(kExitUsage, absl::StrCat(m.status().message(), " (--metrics_listen)"));
  metrics->http = std::move(*m);
  fprintf(stderr, "rsslab_loadgen: metrics at http://%s/metrics\n",
          metrics->http->address().c_str());
  return 0;
}

struct RunDir {
  std::unique_ptr<rsslab::EventLog> log;
  // Fed every record of this run (and, for a resumed soak, the earlier
  // part's): the run's summary.
  rsslab::SummaryBuilder summary;
  std::set<std::string> done_cells;  // resumed sweep: cells kept
  rsslab::SoakResume soak_resume;    // resumed soak: where it goes on
  uint64_t torn_bytes = 0;           // resumed: the torn last line cut off
};

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// A soak's length: its (first) repeat step's duration.
double SoakDurationS(const rsslab::v1::Scenario& scenario) {
  for (const auto& step : scenario.step()) {
    if (step.has_repeat() && step.repeat().duration_s() > 0) return step.repeat().duration_s();
  }
  return 0;
}

// --resume: checked against the interrupted run's header before anything
// is written; then its torn last line (if any) is cut and records append.
int ReopenRunDir(const Invocation& inv, RunDir* dir) {
  int unreadable = 0;
  auto before = rsslab::ReadEvents(inv.out, &unreadable);
  if (!before.ok()) {
    return Fail(kExitUsage, absl::StrCat("--resume: ", before.status().message(),
                                         ": no interrupted run in --out=", inv.out));
  }
  if (before->empty()) {
    return Fail(kExitUsage, absl::StrCat("--resume: ", inv.out, "/events.jsonl holds no record"));
  }
  if (auto s = rsslab::CheckResumable(before->front(), inv.scenario, inv.flags); !s.ok()) {
    return Fail(kExitUsage, absl::StrCat("--resume --out=", inv.out, ": ", s.message()));
  }
  dir->done_cells = rsslab::SuccessfulCells(*before);
  if (inv.scenario.has_soak()) dir->soak_resume = rsslab::SoakResumePoint(*before);
  auto log = rsslab::EventLog::Reopen(inv.out, absl::GetFlag(FLAGS_fsync), &dir->torn_bytes);
  if (!log.ok()) return Fail(kExitFailed, std::string(log.status().message()));
  dir->log = *std::move(log);

  rsslab::v1::Event ev;
  auto* rs = ev.mutable_resumed();
  for (const auto& a : inv.argv) rs->add_argv(a);
  rs->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  for (const std::string& c : dir->done_cells) rs->add_kept_cells(c);
  rs->set_torn_bytes(dir->torn_bytes);
  rs->set_agent(absl::GetFlag(FLAGS_agent));
  rs->set_hostname(Hostname());
  if (auto s = dir->log->Append(ev); !s.ok()) return Fail(kExitFailed, std::string(s.message()));
  return 0;
}

void PrintResumeBanner(const Invocation& inv, RunDir* dir) {
  const std::string torn =
      dir->torn_bytes > 0 ? absl::StrFormat("; cut a torn last line of %d bytes", dir->torn_bytes)
                          : "";
  if (inv.scenario.has_soak()) {
    const rsslab::SoakResume& at = dir->soak_resume;
    fprintf(stderr,
            "rsslab_loadgen: resuming the soak in %s: %d cycle(s) recorded, continuing at cycle %d "
            "until %s (the first start + its duration)%s\n",
            inv.out.c_str(), at.first_cycle, at.first_cycle + 1,
            absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                             at.started + absl::Seconds(SoakDurationS(inv.scenario)),
                             absl::UTCTimeZone())
                .c_str(),
            torn.c_str());
    return;
  }
  const auto& sw = inv.scenario.sweep();
  const int total =
      std::max<int>(1, static_cast<int>(sw.repeats())) * sw.threads_size() * sw.profiles_size();
  fprintf(stderr, "rsslab_loadgen: resuming %s: %zu of %d cells already done (kept), %d to run%s\n",
          inv.out.c_str(), dir->done_cells.size(), total,
          total - static_cast<int>(dir->done_cells.size()), torn.c_str());
}

rsslab::v1::Event Header(const Invocation& inv) {
  rsslab::v1::Event header;
  auto* h = header.mutable_header();
  h->set_scenario_name(inv.scenario.name());
  *h->mutable_scenario() = inv.scenario;
  for (const auto& a : inv.argv) h->add_argv(a);
  h->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  h->set_target(absl::GetFlag(FLAGS_target));
  h->set_control(absl::GetFlag(FLAGS_control));
  h->set_loadgen_version("rsslab_loadgen 0.1");
  h->set_hostname(Hostname());
  *h->mutable_flags() = inv.flags;
  if (inv.scenario.has_sweep()) {
    h->set_agent(absl::GetFlag(FLAGS_agent));
    h->clear_target();
    h->clear_control();
  }
  return header;
}

// A new run: an empty directory and its header record. A resumed one: its
// records so far kept, a `resumed` record appended.
int OpenRunDir(const Invocation& inv, RunDir* dir) {
  if (inv.resume) {
    if (int rc = ReopenRunDir(inv, dir); rc != 0) return rc;
  } else {
    if (auto s = rsslab::CheckRunDirEmpty(inv.out); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    auto log = rsslab::EventLog::Create(inv.out, absl::GetFlag(FLAGS_fsync));
    if (!log.ok()) return Fail(kExitFailed, std::string(log.status().message()));
    dir->log = *std::move(log);
  }
  const rsslab::v1::Event header = Header(inv);
  if (inv.resume && inv.scenario.has_soak()) {
    // The summary covers the whole soak: what ran before, then this part.
    int unreadable = 0;
    auto before = rsslab::ReadEvents(inv.out, &unreadable);
    if (before.ok()) {
      for (const auto& e : *before) dir->summary.Add(e);
    }
  } else {
    dir->summary.Add(header);
  }
  if (inv.resume) PrintResumeBanner(inv, dir);
  if (!inv.resume) {
    if (auto s = dir->log->Append(header); !s.ok()) {
      return Fail(kExitFailed, std::string(s.message()));
    }
  }
  return 0;
}

// SIGINT/SIGTERM are blocked before any thread exists (gRPC makes some); this
// thread takes them with sigwait and asks the run to stop, a second one
// exits at once.
void StopOnSignals(const sigset_t& sigs, rsslab::StopFlag* stop) {
  std::thread([stop, sigs] {
    int sig = 0;
    int seen = 0;
    while (sigwait(&sigs, &sig) == 0) {
      if (++seen > 1) {
        fprintf(stderr, "\nrsslab_loadgen: second signal, exiting now\n");
        _exit(kExitInterrupted);
      }
      fprintf(stderr, "\nrsslab_loadgen: %s: stopping; waiting for in-flight RPCs (again to quit now)\n",
              strsignal(sig));
      stop->Stop();
    }
  }).detach();
}

// ---------------------------------------------------------------------------
// 3. Executing: the plan, once against --target/--control or once per cell
// of a sweep.

struct Outcome {
  bool sweep = false;
  absl::Time start;
  // Why the run or the sweep could not finish (a failed step, an unreachable
  // agent, CANCELLED when interrupted); cell failures are counted below.
  absl::Status status;
  bool interrupted = false;
  int cells = 0;         // sweep: cells run now
  int failed_cells = 0;  // sweep: of which failed
};

rsslab::Runner::Options RunnerOptions(const Invocation& inv, const RunDir& dir, Metrics* metrics) {
  rsslab::Runner::Options ro;
  ro.target = absl::GetFlag(FLAGS_target);
  ro.control = absl::GetFlag(FLAGS_control);
  ro.flags = inv.flags;
  ro.max_errors = absl::GetFlag(FLAGS_max_errors);
  ro.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  ro.client_threads = absl::GetFlag(FLAGS_client_threads);
  ro.callback_api = absl::GetFlag(FLAGS_client_api) == "callback";
  ro.control_timeout = absl::GetFlag(FLAGS_control_timeout);
  ro.progress = inv.progress;
  ro.security = &inv.security;
  if (metrics->http != nullptr) ro.metrics = &metrics->values;
  if (inv.resume && inv.scenario.has_soak()) {
    ro.first_cycle = dir.soak_resume.first_cycle;
    ro.repeat_started = dir.soak_resume.started;
  }
  return ro;
}

Outcome Execute(const Invocation& inv, RunDir* dir, Metrics* metrics,
                const rsslab::StopFlag* stop) {
  Outcome o;
  o.start = absl::Now();
  const rsslab::Runner::Options ro = RunnerOptions(inv, *dir, metrics);
  if (inv.scenario.has_sweep()) {
    o.sweep = true;
    rsslab::SweepOptions so;
    so.agent = absl::GetFlag(FLAGS_agent);
    so.runner = ro;
    so.done_cells = dir->done_cells;
    absl::StatusOr<rsslab::SweepOutcome> r =
        rsslab::RunSweep(so, inv.scenario, inv.plan, dir->log.get(), stop);
    o.status = r.status();
    if (r.ok()) {
      o.interrupted = r->interrupted;
      o.cells = r->cells;
      o.failed_cells = r->failed;
    }
    return o;
  }
  rsslab::Runner runner(ro, dir->log.get(), stop, &dir->summary);
  o.status = runner.Run(inv.plan);
  o.interrupted = absl::IsCancelled(o.status);
  return o;
}

// ---------------------------------------------------------------------------
// 4. Finishing: one footer, the summary, the exit status.

rsslab::v1::Event Footer(const Outcome& o, uint64_t events) {
  rsslab::v1::Event footer;
  auto* f = footer.mutable_footer();
  f->set_completed(o.status.ok() && !o.interrupted);
  if (!o.status.ok()) {
    f->set_error(std::string(o.status.message()));
  } else if (o.interrupted) {
    f->set_error("interrupted");
  } else if (o.failed_cells > 0) {
    f->set_error(absl::StrFormat("%d of %d cells failed", o.failed_cells, o.cells));
  }
  f->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  f->set_events(events);
  return footer;
}

// A sweep's table, built from events.jsonl exactly as `report` would: one
// source of truth for both.
absl::Status SummarizeSweep(const Invocation& inv, const Outcome& o) {
  int skipped = 0;
  auto events = rsslab::ReadEvents(inv.out, &skipped);
  if (!events.ok()) return events.status();
  rsslab::SweepSummary sw = rsslab::BuildSweepSummary(*events);
  absl::Status written = rsslab::WriteSweepSummary(inv.out, sw);
  printf("%s", rsslab::SweepTable(sw).c_str());
  fflush(stdout);
  SweepReport(inv.out);
  const bool plots = access((inv.out + "/rss_under_load.png").c_str(), R_OK) == 0;
  printf("sweep: %zu cells, %d failed, %.0f s\nrun directory: %s (events.jsonl, summary.md, "
         "summary.csv%s)\n",
         sw.cells.size(), sw.failed_cells, absl::ToDoubleSeconds(absl::Now() - o.start),
         inv.out.c_str(), plots ? ", rss_under_load.png, rss_after_shrink.png" : "");
  fflush(stdout);
  return written;
}

absl::Status SummarizeRun(const Invocation& inv, const rsslab::RunSummary& summary) {
  absl::Status written = rsslab::WriteSummary(inv.out, summary);
  printf("%s", rsslab::SummaryTable({summary}, {inv.out}).c_str());
  if (summary.soak.enabled) {
    PrintSoak(summary.soak);
    SweepReport(inv.out);  // plots, when python3 + matplotlib are here
  }
  printf("run directory: %s\n", inv.out.c_str());
  fflush(stdout);
  return written;
}

int ExitStatus(const Invocation& inv, const Outcome& o) {
  if (o.interrupted) {
    Fail(kExitInterrupted,
         absl::StrCat("interrupted; summary of ", o.sweep ? "the cells that ran" : "what completed",
                      " in ", inv.out));
    return kExitInterrupted;
  }
  if (!o.status.ok()) {
    // A sweep that names a profile the agent does not have was asked wrong.
    if (o.sweep) {
      return Fail(absl::IsNotFound(o.status) ? kExitUsage : kExitFailed,
                  std::string(o.status.message()));
    }
    Fail(kExitFailed, std::string(o.status.message()));
    fprintf(stderr, "rsslab_loadgen: run incomplete; records kept in %s\n", inv.out.c_str());
    return kExitFailed;
  }
  if (o.failed_cells > 0) {
    return Fail(kExitFailed, absl::StrFormat("%d of %d cells failed (see %s/summary.md)",
                                             o.failed_cells, o.cells, inv.out));
  }
  return 0;
}

int Finish(const Invocation& inv, const Outcome& o, RunDir* dir, Metrics* metrics,
           const rsslab::StopFlag& stop) {
  const rsslab::v1::Event footer = Footer(o, dir->log->count() + 1);
  metrics->values.RunEnded(footer.footer().completed());
  dir->summary.Add(footer);
  const absl::Status logged = dir->log->Append(footer);
  const absl::Status summarized =
      o.sweep ? SummarizeSweep(inv, o) : SummarizeRun(inv, dir->summary.summary());
  const absl::Duration hold = absl::GetFlag(FLAGS_metrics_hold);
  if (metrics->http != nullptr && hold > absl::ZeroDuration() && !stop.stopped()) {
    fprintf(stderr, "rsslab_loadgen: run over; serving the final metrics at %s for %s (Ctrl-C ends it)\n",
            metrics->http->address().c_str(), absl::FormatDuration(hold).c_str());
    stop.WaitFor(hold);
  }
  if (metrics->http != nullptr) metrics->http->Stop();
  if (!logged.ok()) return Fail(kExitFailed, std::string(logged.message()));
  if (!summarized.ok()) return Fail(kExitFailed, std::string(summarized.message()));
  return ExitStatus(inv, o);
}

void SetUsage() {
  absl::FlagsUsageConfig cfg;
  cfg.contains_help_flags = [](absl::string_view f) {
    return absl::StrContains(f, "loadgen/");
  };
  cfg.contains_helpshort_flags = cfg.contains_help_flags;
  absl::SetFlagsUsageConfig(cfg);
  absl::SetProgramUsageMessage(
      "drives an rsslab_server over gRPC and scripts its phases.\n"
      "  rsslab_loadgen --builtin=seed [--scale=0.1] [--target=H:P --control=H:P]\n"
      "  rsslab_loadgen --scenario=FILE | --requests=N | --duration=30s [load flags]\n"
      "  rsslab_loadgen --builtin=sweep --agent=H:P [--profiles=a,b --threads_list=1,4 --repeats=N]\n"
      "  rsslab_loadgen report RUN_DIR...   rebuild summaries from events.jsonl");
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread exists: see StopOnSignals.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  SetUsage();
  std::vector<char*> pos = absl::ParseCommandLine(argc, argv);
  if (pos.size() >= 2 && std::string(pos[1]) == "report") {
    if (pos.size() < 3) return Fail(kExitUsage, "report needs a run directory");
    return Report(std::vector<std::string>(pos.begin() + 2, pos.end()));
  }
  if (pos.size() > 1) {
    return Fail(kExitUsage, absl::StrFormat("unexpected argument \"%s\" (see --help)", pos[1]));
  }
  if (!absl::GetFlag(FLAGS_print_builtin).empty()) {
    auto text = rsslab::BuiltinText(absl::GetFlag(FLAGS_print_builtin));
    if (!text.ok()) return Fail(kExitUsage, std::string(text.status().message()));
    printf("%s", text->c_str());
    return 0;
  }

  absl::StatusOr<Invocation> inv = ParseInvocation(std::vector<std::string>(argv, argv + argc));
  if (!inv.ok()) return Fail(kExitUsage, std::string(inv.status().message()));
  Metrics metrics;
  if (int rc = OpenMetrics(*inv, &metrics); rc != 0) return rc;
  RunDir dir;
  if (int rc = OpenRunDir(*inv, &dir); rc != 0) return rc;
  rsslab::StopFlag stop;
  StopOnSignals(sigs, &stop);
  const Outcome outcome = Execute(*inv, &dir, &metrics, &stop);
  return Finish(*inv, outcome, &dir, &metrics, stop);
}
