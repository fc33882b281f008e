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
#include "common/handler_params.h"
#include "loadgen/engine.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/plan.h"
#include "loadgen/event_log.h"
#include "loadgen/summary.h"
#include "loadgen/summary_render.h"
#include "loadgen/runner.h"
#include "loadgen/scenario.h"
#include "loadgen/report_tool.h"
#include "loadgen/resume.h"
#include "loadgen/sweep.h"
#include "loadgen/sweep_summary.h"
#include "common/metrics/http_server.h"

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
  for (const auto& c : k.cycles) printf("%s\n", rsslab::SoakCycleLine(c).c_str());
  printf("soak: %zu cycles, %d flagged, %llu watch records\n", k.cycles.size(),
         k.flagged, static_cast<unsigned long long>(k.watch_records));
  if (k.server_lost) {
    const auto& st = k.last_snapshot.status();
    printf("soak: SERVER LOST at %s: %s; last snapshot at %s: rss %.1f MiB, %d threads, %d arenas\n",
           absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", absl::FromUnixNanos(k.lost_unix_nanos),
                            absl::UTCTimeZone()).c_str(),
           k.lost_error.c_str(),
           k.last_snapshot_unix_nanos == 0
               ? "-"
               : absl::FormatTime("%H:%M:%E3S", absl::FromUnixNanos(k.last_snapshot_unix_nanos),
                                  absl::UTCTimeZone()).c_str(),
           st.rss_bytes() / 1048576.0, st.threads(), k.last_snapshot.memory_map().arena_count());
  }
  fflush(stdout);
}

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

// Runs every cell, writes the footer and the sweep's summary, runs the report
// tool. Exit status 1 if any cell failed: the table has holes.
int SweepMain(const rsslab::v1::Scenario& scenario, const rsslab::Plan& plan,
              const rsslab::Runner::Options& ro,
              rsslab::EventLog* log, const rsslab::StopFlag* stop, const std::string& out,
              const std::set<std::string>& done_cells) {
  rsslab::SweepOptions so;
  so.agent = absl::GetFlag(FLAGS_agent);
  so.runner = ro;
  so.done_cells = done_cells;
  const absl::Time start = absl::Now();
  absl::StatusOr<rsslab::SweepOutcome> r = rsslab::RunSweep(so, scenario, plan, log, stop);
  rsslab::v1::Event footer;
  auto* f = footer.mutable_footer();
  f->set_completed(r.ok() && !r->interrupted);
  if (!r.ok()) f->set_error(std::string(r.status().message()));
  else if (r->interrupted) f->set_error("interrupted");
  else if (r->failed > 0) f->set_error(absl::StrFormat("%d of %d cells failed", r->failed, r->cells));
  f->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  f->set_events(log->count() + 1);
  absl::Status ws = log->Append(footer);
  int skipped = 0;
  auto events = rsslab::ReadEvents(out, &skipped);
  if (!events.ok()) return Fail(kExitFailed, std::string(events.status().message()));
  // Built from events.jsonl, exactly as `report` would: one source of truth.
  rsslab::SweepSummary sw = rsslab::BuildSweepSummary(*events);
  absl::Status ss = rsslab::WriteSweepSummary(out, sw);
  printf("%s", rsslab::SweepTable(sw).c_str());
  fflush(stdout);
  SweepReport(out);
  const bool plots = access((out + "/rss_under_load.png").c_str(), R_OK) == 0;
  printf("sweep: %zu cells, %d failed, %.0f s\nrun directory: %s (events.jsonl, summary.md, "
         "summary.csv%s)\n",
         sw.cells.size(), sw.failed_cells, absl::ToDoubleSeconds(absl::Now() - start),
         out.c_str(), plots ? ", rss_under_load.png, rss_after_shrink.png" : "");
  fflush(stdout);
  if (!ws.ok()) return Fail(kExitFailed, std::string(ws.message()));
  if (!ss.ok()) return Fail(kExitFailed, std::string(ss.message()));
  if (!r.ok()) return Fail(absl::IsNotFound(r.status()) ? kExitUsage : kExitFailed,
                           std::string(r.status().message()));
  if (r->interrupted) {
    Fail(kExitInterrupted, absl::StrCat("interrupted; summary of the cells that ran in ", out));
    return kExitInterrupted;
  }
  if (r->failed > 0) {
    return Fail(kExitFailed, absl::StrFormat("%d of %d cells failed (see %s/summary.md)",
                                             r->failed, r->cells, out));
  }
  return 0;
}

// A soak's length: its (first) repeat step's duration.
double SoakDurationS(const rsslab::v1::Scenario& scenario) {
  for (const auto& step : scenario.step()) {
    if (step.has_repeat() && step.repeat().duration_s() > 0) return step.repeat().duration_s();
  }
  return 0;
}

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  // Block SIGINT/SIGTERM before any thread exists (gRPC makes some); a
  // dedicated thread takes them with sigwait and asks the run to stop.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

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
  std::vector<char*> pos = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(argv, argv + argc);

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

  // Everything about the input is checked before any connection is made.
  absl::StatusOr<rsslab::v1::LoadSpec> flags = FlagSpec();
  if (!flags.ok()) return Fail(kExitUsage, std::string(flags.status().message()));
  const std::string scenario_file = absl::GetFlag(FLAGS_scenario);
  const std::string builtin = absl::GetFlag(FLAGS_builtin);
  if (!scenario_file.empty() && !builtin.empty()) {
    return Fail(kExitUsage, "--scenario and --builtin are alternatives; set one");
  }
  absl::StatusOr<rsslab::v1::Scenario> scenario;
  if (!scenario_file.empty()) {
    scenario = rsslab::LoadScenarioFile(scenario_file, *flags);
  } else if (!builtin.empty()) {
    scenario = rsslab::BuiltinScenario(builtin, *flags);
  } else if (flags->requests() > 0 || flags->duration_s() > 0) {
    scenario = rsslab::AdHocScenario();
  } else {
    return Fail(kExitUsage,
                "nothing to run: give --builtin=seed|quick, --scenario=FILE, or "
                "--requests / --duration for a single load step (see --help)");
  }
  if (!scenario.ok()) return Fail(kExitUsage, std::string(scenario.status().message()));
  if (scenario->has_soak() && flags->duration_s() > 0) {
    // A soak's --duration is its length (hours), not each step's.
    rsslab::ApplySoakDuration(&*scenario, flags->duration_s());
    flags->clear_duration_s();
  }
  const bool overrides = !absl::GetFlag(FLAGS_profiles).empty() ||
                         !absl::GetFlag(FLAGS_threads_list).empty() ||
                         absl::GetFlag(FLAGS_repeats) != 0;
  if (overrides && !scenario->has_sweep()) {
    return Fail(kExitUsage,
                "--profiles, --threads_list and --repeats shape a sweep; use "
                "--builtin=sweep or a scenario with a sweep block");
  }
  if (scenario->has_sweep()) {
    if (auto s = rsslab::ApplySweepOverrides(&*scenario, absl::GetFlag(FLAGS_profiles),
                                             absl::GetFlag(FLAGS_threads_list),
                                             absl::GetFlag(FLAGS_repeats));
        !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    if (absl::GetFlag(FLAGS_agent).empty()) {
      return Fail(kExitUsage,
                  "a sweep launches a fresh server per cell through rsslab_agent: "
                  "give --agent=HOST:PORT (see tools/sweep.sh)");
    }
  }
  // Every load step resolved once, after every override: the plan is what
  // runs, in this run and in every cell of a sweep.
  absl::StatusOr<rsslab::Plan> plan = rsslab::BuildPlan(*scenario, *flags);
  if (!plan.ok()) return Fail(kExitUsage, std::string(plan.status().message()));
  const std::string progress_flag = absl::GetFlag(FLAGS_progress);
  rsslab::Runner::ProgressMode progress;
  if (progress_flag == "auto") {
    progress = isatty(STDERR_FILENO) ? rsslab::Runner::ProgressMode::kLive
                                     : rsslab::Runner::ProgressMode::kLines;
  } else if (progress_flag == "live") {
    progress = rsslab::Runner::ProgressMode::kLive;
  } else if (progress_flag == "lines") {
    progress = rsslab::Runner::ProgressMode::kLines;
  } else if (progress_flag == "none") {
    progress = rsslab::Runner::ProgressMode::kNone;
  } else {
    return Fail(kExitUsage, absl::StrFormat("--progress=%s: use auto, live, lines or none", progress_flag));
  }
  if (absl::GetFlag(FLAGS_client_api) != "callback" && absl::GetFlag(FLAGS_client_api) != "cq") {
    return Fail(kExitUsage, absl::StrFormat("--client_api=%s: use callback or cq",
                                            absl::GetFlag(FLAGS_client_api)));
  }
  if (absl::GetFlag(FLAGS_client_threads) < 0) {
    return Fail(kExitUsage, absl::StrFormat("--client_threads=%d: use 0 (one per CPU) or a positive count",
                                            absl::GetFlag(FLAGS_client_threads)));
  }

  // Credentials are read before the run directory exists: a bad file is a
  // usage error with nothing written.
  absl::StatusOr<rsslab::Security> security = rsslab::Security::FromFlags();
  if (!security.ok()) return Fail(kExitUsage, std::string(security.status().message()));

  const bool resume = absl::GetFlag(FLAGS_resume);
  if (resume && !scenario->has_sweep() && !scenario->has_soak()) {
    return Fail(kExitUsage,
                "--resume continues an interrupted sweep or soak (--builtin=sweep|soak or a "
                "scenario with a sweep or soak block); other runs start afresh in a new --out");
  }
  if (resume && absl::GetFlag(FLAGS_out).empty()) {
    return Fail(kExitUsage, "--resume continues the run in --out=DIR: give the interrupted run's --out");
  }

  // The metrics port is opened before the run directory exists: a taken
  // port is a usage error with nothing written or sent.
  rsslab::LoadgenMetrics metrics;
  std::unique_ptr<rsslab::metrics::MetricsHttpServer> metrics_http;
  const std::string metrics_addr =
      rsslab::metrics::DefaultToLoopback(absl::GetFlag(FLAGS_metrics_listen));
  if (absl::GetFlag(FLAGS_metrics_hold) < absl::ZeroDuration()) {
    return Fail(kExitUsage, "--metrics_hold must not be negative");
  }
  if (absl::GetFlag(FLAGS_metrics_hold) > absl::ZeroDuration() && metrics_addr.empty()) {
    return Fail(kExitUsage, "--metrics_hold needs --metrics_listen");
  }
  if (!metrics_addr.empty()) {
    rsslab::metrics::MetricsHttpServer::Options mo;
    mo.thread_name = "lg-metrics";
    auto m = rsslab::metrics::MetricsHttpServer::Start(
        metrics_addr, [&metrics] { return metrics.Text(); }, mo);
    if (!m.ok()) {
      return Fail(kExitUsage, absl::StrCat(m.status().message(), " (--metrics_listen)"));
    }
    metrics_http = std::move(*m);
    fprintf(stderr, "rsslab_loadgen: metrics at http://%s/metrics\n",
            metrics_http->address().c_str());
  }

  std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    out = absl::StrCat("results/",
                       absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()),
                       "-", scenario->name().empty() ? "run" : scenario->name());
  }
  // --resume: checked against the interrupted run's header before anything
  // is written; then its torn last line (if any) is cut and records append.
  std::set<std::string> done_cells;
  rsslab::SoakResume soak_resume;
  uint64_t torn_bytes = 0;
  absl::StatusOr<std::unique_ptr<rsslab::EventLog>> log;
  if (resume) {
    int unreadable = 0;
    auto before = rsslab::ReadEvents(out, &unreadable);
    if (!before.ok()) {
      return Fail(kExitUsage, absl::StrCat("--resume: ", before.status().message(),
                                           ": no interrupted run in --out=", out));
    }
    if (before->empty()) {
      return Fail(kExitUsage, absl::StrCat("--resume: ", out, "/events.jsonl holds no record"));
    }
    if (auto s = rsslab::CheckResumable(before->front(), *scenario, *flags); !s.ok()) {
      return Fail(kExitUsage, absl::StrCat("--resume --out=", out, ": ", s.message()));
    }
    done_cells = rsslab::SuccessfulCells(*before);
    if (scenario->has_soak()) soak_resume = rsslab::SoakResumePoint(*before);
    log = rsslab::EventLog::Reopen(out, absl::GetFlag(FLAGS_fsync), &torn_bytes);
  } else {
    if (auto s = rsslab::CheckRunDirEmpty(out); !s.ok()) {
      return Fail(kExitUsage, std::string(s.message()));
    }
    log = rsslab::EventLog::Create(out, absl::GetFlag(FLAGS_fsync));
  }
  if (!log.ok()) return Fail(kExitFailed, std::string(log.status().message()));

  rsslab::StopFlag stop;
  std::thread([&stop, sigs] {
    int sig = 0;
    int seen = 0;
    while (sigwait(&sigs, &sig) == 0) {
      if (++seen > 1) {
        fprintf(stderr, "\nrsslab_loadgen: second signal, exiting now\n");
        _exit(kExitInterrupted);
      }
      fprintf(stderr, "\nrsslab_loadgen: %s: stopping; waiting for in-flight RPCs (again to quit now)\n",
              strsignal(sig));
      stop.Stop();
    }
  }).detach();

  rsslab::SummaryBuilder summary;
  if (resume) {
    rsslab::v1::Event ev;
    auto* rs = ev.mutable_resumed();
    for (const auto& a : args) rs->add_argv(a);
    rs->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
    for (const std::string& c : done_cells) rs->add_kept_cells(c);
    rs->set_torn_bytes(torn_bytes);
    rs->set_agent(absl::GetFlag(FLAGS_agent));
    rs->set_hostname(Hostname());
    if (auto s = (*log)->Append(ev); !s.ok()) return Fail(kExitFailed, std::string(s.message()));
  }
  if (resume && scenario->has_soak()) {
    // The summary covers the whole soak: what ran before, then this part.
    int unreadable = 0;
    auto before = rsslab::ReadEvents(out, &unreadable);
    if (before.ok()) {
      for (const auto& e : *before) summary.Add(e);
    }
    fprintf(stderr,
            "rsslab_loadgen: resuming the soak in %s: %d cycle(s) recorded, continuing at cycle %d "
            "until %s (the first start + its duration)%s\n",
            out.c_str(), soak_resume.first_cycle, soak_resume.first_cycle + 1,
            absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                             soak_resume.started + absl::Seconds(SoakDurationS(*scenario)),
                             absl::UTCTimeZone())
                .c_str(),
            torn_bytes > 0
                ? absl::StrFormat("; cut a torn last line of %d bytes", torn_bytes).c_str()
                : "");
  } else if (resume) {
    const auto& sw = scenario->sweep();
    const int total = std::max<int>(1, static_cast<int>(sw.repeats())) * sw.threads_size() * sw.profiles_size();
    fprintf(stderr,
            "rsslab_loadgen: resuming %s: %zu of %d cells already done (kept), %d to run%s\n",
            out.c_str(), done_cells.size(), total, total - static_cast<int>(done_cells.size()),
            torn_bytes > 0
                ? absl::StrFormat("; cut a torn last line of %d bytes", torn_bytes).c_str()
                : "");
  }
  rsslab::v1::Event header;
  auto* h = header.mutable_header();
  h->set_scenario_name(scenario->name());
  *h->mutable_scenario() = *scenario;
  for (const auto& a : args) h->add_argv(a);
  h->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  h->set_target(absl::GetFlag(FLAGS_target));
  h->set_control(absl::GetFlag(FLAGS_control));
  h->set_loadgen_version("rsslab_loadgen 0.1");
  h->set_hostname(Hostname());
  *h->mutable_flags() = *flags;
  if (scenario->has_sweep()) {
    h->set_agent(absl::GetFlag(FLAGS_agent));
    h->clear_target();
    h->clear_control();
  }
  if (!(resume && scenario->has_soak())) summary.Add(header);
  if (!resume) {
    if (auto s = (*log)->Append(header); !s.ok()) return Fail(kExitFailed, std::string(s.message()));
  }

  rsslab::Runner::Options ro;
  ro.target = absl::GetFlag(FLAGS_target);
  ro.control = absl::GetFlag(FLAGS_control);
  ro.flags = *flags;
  ro.max_errors = absl::GetFlag(FLAGS_max_errors);
  ro.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  ro.client_threads = absl::GetFlag(FLAGS_client_threads);
  ro.callback_api = absl::GetFlag(FLAGS_client_api) == "callback";
  ro.control_timeout = absl::GetFlag(FLAGS_control_timeout);
  ro.progress = progress;
  ro.security = &*security;
  if (metrics_http != nullptr) ro.metrics = &metrics;
  if (resume && scenario->has_soak()) {
    ro.first_cycle = soak_resume.first_cycle;
    ro.repeat_started = soak_resume.started;
  }
  if (scenario->has_sweep()) return SweepMain(*scenario, *plan, ro, log->get(), &stop, out, done_cells);
  rsslab::Runner runner(ro, log->get(), &stop, &summary);
  const absl::Status status = runner.Run(*plan);
  metrics.RunEnded(status.ok());

  rsslab::v1::Event footer;
  footer.mutable_footer()->set_completed(status.ok());
  if (!status.ok()) footer.mutable_footer()->set_error(std::string(status.message()));
  footer.mutable_footer()->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  footer.mutable_footer()->set_events((*log)->count() + 1);
  summary.Add(footer);
  absl::Status ws = (*log)->Append(footer);
  absl::Status ss = rsslab::WriteSummary(out, summary.summary());

  printf("%s", rsslab::SummaryTable({summary.summary()}, {out}).c_str());
  if (summary.summary().soak.enabled) {
    PrintSoak(summary.summary().soak);
    SweepReport(out);  // plots, when python3 + matplotlib are here
  }
  printf("run directory: %s\n", out.c_str());
  fflush(stdout);
  const absl::Duration hold = absl::GetFlag(FLAGS_metrics_hold);
  if (metrics_http != nullptr && hold > absl::ZeroDuration() && !stop.stopped()) {
    fprintf(stderr, "rsslab_loadgen: run over; serving the final metrics at %s for %s (Ctrl-C ends it)\n",
            metrics_http->address().c_str(), absl::FormatDuration(hold).c_str());
    stop.WaitFor(hold);
  }
  if (metrics_http != nullptr) metrics_http->Stop();
  if (!ws.ok()) return Fail(kExitFailed, std::string(ws.message()));
  if (!ss.ok()) return Fail(kExitFailed, std::string(ss.message()));
  if (absl::IsCancelled(status)) {
    Fail(kExitInterrupted, absl::StrCat("interrupted; summary of what completed in ", out));
    return kExitInterrupted;
  }
  if (!status.ok()) {
    Fail(kExitFailed, std::string(status.message()));
    fprintf(stderr, "rsslab_loadgen: run incomplete; records kept in %s\n", out.c_str());
    return kExitFailed;
  }
  return 0;
}
