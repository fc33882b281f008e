// rsslab_loadgen: drives an rsslab_server over gRPC and scripts its phases.
//
//   rsslab_loadgen --builtin=seed --scale=0.1 --target=HOST:PORT --control=HOST:PORT
//   rsslab_loadgen --scenario=my.txtpb
//   rsslab_loadgen --requests=100000 --concurrency=64 --channels=4   (one load step)
//   rsslab_loadgen --rate=2000 --arrival=poisson --duration=30s      (open loop)
//   rsslab_loadgen --builtin=soak --duration=4h   (cycles + watch stream)
//   rsslab_loadgen report RUN_DIR [RUN_DIR...]   (rebuild summaries from events.jsonl)
//   rsslab_loadgen compare BASE NEW [--fail_if='rss_after_idle>+10%']   (docs/COMPARE.md)
//   rsslab_loadgen sweep --agent=HOST:PORT ...   (the same as --builtin=sweep)
//   rsslab_loadgen --builtin=sweep --agent=HOST:PORT [--profiles=glibc,jemalloc]
//       [--threads_list=1,4] [--repeats=N] [--scale=0.1]   (seed 000's matrix)
//   rsslab_loadgen ... the same sweep command ... --out=DIR --resume
//       (continue a sweep that was killed: only the cells not yet done run)
//   rsslab_loadgen --builtin=sweep --agent=A:50060,B:50060   (one cell per agent at a time)
//   rsslab_loadgen ... sweep ... --print_cells [--json]   (the numbered cells, matrix id)
//   rsslab_loadgen ... sweep ... --cells=3,7-9 --local [--server_cpus=0 --loadgen_cpus=1]
//       [--results_dir=DIR]   (cells launched here, no agent: a batch task's command)
//   rsslab_loadgen merge --out=DIR RUN_DIR...   (one sweep from run dirs of one matrix)
//
// Exit status: 0 when every step succeeded, 1 when a step or the run
// failed, 2 for bad input (nothing was sent), 130 when interrupted.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/echo.h"
#include "common/files.h"
#include "common/flags_parse.h"
#include "common/handler_params.h"
#include "common/metrics/http_server.h"
#include "common/shipped.h"
#include "agent/command_flags.h"
#include "agent/profiles.h"
#include "loadgen/call_flags.h"
#include "loadgen/sweep/agents_list.h"
#include "loadgen/sweep/cell_host.h"
#include "loadgen/results/cells.h"
#include "common/host_info.h"
#include "loadgen/sweep/merge_main.h"
#include "loadgen/results/compare_main.h"
#include "loadgen/engine.h"
#include "loadgen/flags_check.h"
#include "loadgen/results/event_log.h"
#include "loadgen/loadgen_metrics.h"
#include "loadgen/plan.h"
#include "loadgen/progress_line.h"
#include "loadgen/results/cli.h"
#include "loadgen/results/report_main.h"
#include "loadgen/sweep/resume.h"
#include "loadgen/sweep/resume_identity.h"
#include "loadgen/run_flags.h"
#include "loadgen/runner.h"
#include "loadgen/scenario.h"
#include "loadgen/results/summary.h"
#include "loadgen/results/summary_render.h"
#include "loadgen/sweep/sweep.h"
#include "loadgen/sweep/sweep_flags.h"
#include "loadgen/results/sweep_summary.h"

// --json (defined with `compare`, loadgen/results/compare_main.cc) also makes --print_cells JSON.
ABSL_DECLARE_FLAG(bool, json);

namespace {

using rsslab::cli::Fail;
constexpr int kExitFailed = rsslab::cli::kExitFailed;
constexpr int kExitUsage = rsslab::cli::kExitUsage;
constexpr int kExitInterrupted = rsslab::cli::kExitInterrupted;

// The per-cycle table and, when the server went away, when and what it
// looked like last.
void PrintSoak(const rsslab::SoakSummary& k) {
  printf("%s", rsslab::SoakText(k).c_str());
  fflush(stdout);
}

std::string Hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
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
  bool in_place = false;          // --results_dir: resumed in place when it exists
  std::string out;                // the run directory
  std::string metrics_address;    // --metrics_listen, "" when off
  // Sweeps.
  std::string matrix_id;          // cells.h MatrixId
  int cells_total = 0;
  std::vector<int> cells;         // --cells; empty: all
  std::vector<std::string> agents;  // --agent / --agents_file
  bool local = false;             // --local
  rsslab::CpuSplit cpus;          // --local: server / loadgen CPUs
  // --local: --allow_command and its templates (agent/command_flags.h).
  std::map<std::string, rsslab::commands::Command> commands;
  rsslab::CallFlags calls;        // --proto / --call: compiled, checked
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
  rsslab::ApplyCallFlags(&s);
  absl::StatusOr<std::map<std::string, std::string>> params =
      rsslab::ParseHandlerParams(absl::GetFlag(FLAGS_params));
  if (params.ok()) {
    for (const auto& [k, v] : *params) (*s.mutable_params())[k] = v;
  } else {
    errs.push_back(absl::StrCat("--params: ", params.status().message()));
  }
  // The same checks (and upper bounds) as a scenario's layers get.
  for (const std::string& e : rsslab::CheckLoadLayer(s, "flags")) errs.push_back(e);
  if (absl::Status p = rsslab::CheckProcessFlags(
          {absl::GetFlag(FLAGS_client_threads), absl::GetFlag(FLAGS_connect_timeout),
           absl::GetFlag(FLAGS_control_timeout), absl::GetFlag(FLAGS_metrics_hold),
           absl::GetFlag(FLAGS_repeats)});
      !p.ok()) {
    errs.push_back(std::string(p.message()));
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
    const bool agents = !absl::GetFlag(FLAGS_agent).empty() ||
                        !absl::GetFlag(FLAGS_agents_file).empty();
    if (!agents && !absl::GetFlag(FLAGS_local) && !absl::GetFlag(FLAGS_print_cells)) {
      return absl::InvalidArgumentError(
          "a sweep launches a fresh server per cell through rsslab_agent: "
          "give --agent=HOST:PORT[,HOST:PORT...] or --agents_file=FILE, or --local to launch "
          "them on this machine (see docs/DEPLOY.md)");
    }
    if (agents && absl::GetFlag(FLAGS_local)) {
      return absl::InvalidArgumentError(
          "--local launches the servers here, --agent / --agents_file through agents: set one");
    }
  } else {
    const std::pair<const char*, bool> cell_flags[] = {
        {"cells", !absl::GetFlag(FLAGS_cells).empty()},
        {"cell_index_env", !absl::GetFlag(FLAGS_cell_index_env).empty()},
        {"print_cells", absl::GetFlag(FLAGS_print_cells)},
        {"local", absl::GetFlag(FLAGS_local)},
        {"results_dir", !absl::GetFlag(FLAGS_results_dir).empty()},
    };
    for (const auto& [flag, set] : cell_flags) {
      if (!set) continue;
      return absl::InvalidArgumentError(absl::StrFormat(
          "--%s applies to a sweep's cells; \"%s\" is not a sweep (use --builtin=sweep or a "
          "scenario with a sweep block)",
          flag, scenario->name()));
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
  if (absl::GetFlag(FLAGS_resume) && absl::GetFlag(FLAGS_out).empty() &&
      absl::GetFlag(FLAGS_results_dir).empty()) {
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

// --agent=A,B / --agents_file: the list, each once (loadgen/sweep/agents_list.h).
absl::StatusOr<std::vector<std::string>> AgentList() {
  if (!absl::GetFlag(FLAGS_agent).empty() && !absl::GetFlag(FLAGS_agents_file).empty()) {
    return absl::InvalidArgumentError("--agent and --agents_file are alternatives; set one");
  }
  const std::string file = absl::GetFlag(FLAGS_agents_file);
  if (!file.empty()) return rsslab::ReadAgentsFile(file);
  return rsslab::ParseAgentList(absl::GetFlag(FLAGS_agent), ',', "--agent");
}

// --allow_command* for --local: the same allowlist an agent takes, checked
// by the same rules, and the sweep's --command in it.
absl::Status LocalCommands(Invocation* inv) {
  std::vector<char*> args;
  for (const std::string& a : inv->argv) args.push_back(const_cast<char*>(a.c_str()));
  const int argc = static_cast<int>(args.size());
  if (!inv->local) {
    if (rsslab::commands::AnyFlagGiven(argc, args.data())) {
      return absl::InvalidArgumentError(
          "--allow_command* is --local's allowlist; an agent has its own "
          "(rsslab_agent --allow_command=NAME=PATH ...)");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::map<std::string, rsslab::commands::Command>> cmds =
      rsslab::commands::FromFlags(argc, args.data());
  if (!cmds.ok()) return cmds.status();
  inv->commands = *std::move(cmds);
  const std::string& cmd = inv->scenario.sweep().command();
  if (!cmd.empty()) {
    return rsslab::commands::Lookup(inv->commands, cmd, "this loadgen").status();
  }
  return absl::OkStatus();
}

// The sweep's cells, agents, --local and its CPUs.
absl::Status SweepFlags(Invocation* inv) {
  const auto& sw = inv->scenario.sweep();
  inv->cells_total = rsslab::CountCells(sw);
  inv->matrix_id = rsslab::MatrixId(inv->scenario, inv->flags);
  std::string spec = absl::GetFlag(FLAGS_cells);
  const std::string env = absl::GetFlag(FLAGS_cell_index_env);
  if (!env.empty()) {
    if (!spec.empty()) {
      return absl::InvalidArgumentError("--cells and --cell_index_env are alternatives; set one");
    }
    const char* v = env.size() <= 64 ? getenv(env.c_str()) : nullptr;
    if (v == nullptr || *v == '\0') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--cell_index_env=%s: the variable is not set (the batch system sets it for each "
          "task; set it by hand to run one cell)",
          env.substr(0, 64)));
    }
    spec = std::string(v).substr(0, 32);
  }
  if (!spec.empty()) {
    absl::StatusOr<std::vector<int>> cells = rsslab::ParseCellSelection(spec, inv->cells_total);
    if (!cells.ok()) return cells.status();
    inv->cells = *std::move(cells);
  }
  absl::StatusOr<std::vector<std::string>> agents = AgentList();
  if (!agents.ok()) return agents.status();
  inv->agents = *std::move(agents);
  const int attempts = absl::GetFlag(FLAGS_cell_attempts);
  if (attempts < 1 || attempts > 10) {
    return absl::InvalidArgumentError(absl::StrFormat("--cell_attempts=%d: use 1..10", attempts));
  }
  inv->local = absl::GetFlag(FLAGS_local);
  if (absl::Status s = LocalCommands(inv); !s.ok()) return s;
  const bool cpu_flags =
      !absl::GetFlag(FLAGS_server_cpus).empty() || !absl::GetFlag(FLAGS_loadgen_cpus).empty();
  if (!inv->local) {
    if (cpu_flags) {
      return absl::InvalidArgumentError(
          "--server_cpus and --loadgen_cpus pin a --local cell's server and loadgen; an agent's "
          "servers run where the agent runs (pin the agent: taskset -c CPUS rsslab_agent ...)");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<rsslab::CpuSplit> cpus =
      rsslab::ChooseCpus(absl::GetFlag(FLAGS_server_cpus), absl::GetFlag(FLAGS_loadgen_cpus),
                         rsslab::AllowedCpus());
  if (!cpus.ok()) return cpus.status();
  inv->cpus = *std::move(cpus);
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
  if (absl::Status s = rsslab::ApplyCommandFlag(&inv.scenario); !s.ok()) return s;
  // After every change to the scenario and the flags: the plan is what runs.
  absl::StatusOr<rsslab::Plan> plan = rsslab::BuildPlan(inv.scenario, inv.flags);
  if (!plan.ok()) return plan.status();
  inv.plan = *std::move(plan);
  absl::StatusOr<rsslab::CallFlags> calls = rsslab::LoadCallFlags(inv.plan, inv.argv);
  if (!calls.ok()) return calls.status();
  inv.calls = *std::move(calls);
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
  if (inv.scenario.has_sweep()) {
    if (absl::Status s = SweepFlags(&inv); !s.ok()) return s;
  } else if (absl::Status s = LocalCommands(&inv); !s.ok()) {
    return s;  // not --local: any --allow_command is refused
  } else if (absl::GetFlag(FLAGS_target).empty()) {
    // gRPC would take "" for a DNS name and retry until --connect_timeout.
    return absl::InvalidArgumentError(
        "--target is empty: give the server's data address, HOST:PORT");
  }
  inv.resume = absl::GetFlag(FLAGS_resume);
  inv.metrics_address = rsslab::metrics::DefaultToLoopback(absl::GetFlag(FLAGS_metrics_listen));
  inv.out = absl::GetFlag(FLAGS_out);
  if (!absl::GetFlag(FLAGS_results_dir).empty()) {
    if (!inv.out.empty()) {
      return absl::InvalidArgumentError(
          "--results_dir names the cells' run directory itself (DIR/cell-INDEX-MATRIX); --out "
          "names one exactly: set one");
    }
    // One directory per (cell selection, matrix): a rerun of the same
    // command -- a requeued task, a retried pod, the missing indices
    // resubmitted -- finds it and resumes there (PrepareCellDir), so the
    // cell's finished records are kept and never run again. Another
    // matrix in the same results_dir gets other directories.
    const std::string sel = inv.cells.empty() ? std::string("all")
                                              : rsslab::FormatCellSelection(inv.cells);
    inv.out = absl::StrFormat("%s/cell-%s-%s", absl::GetFlag(FLAGS_results_dir),
                              absl::StrReplaceAll(sel, {{",", "_"}}), inv.matrix_id);
    inv.in_place = true;
  }
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
  int lock_fd = -1;                  // --results_dir: held while this run writes there
};


// A soak's length: its (first) repeat step's duration.
double SoakDurationS(const rsslab::v1::Scenario& scenario) {
  for (const auto& step : scenario.step()) {
    if (step.has_repeat() && step.repeat().duration_s() > 0) return step.repeat().duration_s();
  }
  return 0;
}

// --resume: checked against the interrupted run's header before anything
// is written; then its torn last line (if any) is cut and records append.
// Who ran a sweep's cells, as its header records it and --resume checks.
std::string RecordedAgent(const Invocation& inv) {
  return inv.local ? "local" : absl::StrJoin(inv.agents, ",");
}

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
  // The agent as the header records it ("local" for --local, the list for
  // --agents_file), not the raw --agent flag: a killed --local sweep, or a
  // batch task's cell, was refused as "--agent= differs" with the very same
  // command.
  if (auto s = rsslab::CheckResumeIdentity(
          before->front().header(),
          {inv.scenario.has_sweep(), absl::GetFlag(FLAGS_target),
           rsslab::EffectiveControl(absl::GetFlag(FLAGS_control), inv.calls),
           RecordedAgent(inv)});
      !s.ok()) {
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
  rs->set_agent(RecordedAgent(inv));
  rs->set_hostname(Hostname());
  if (auto s = dir->log->Append(ev); !s.ok()) return Fail(kExitFailed, std::string(s.message()));
  return 0;
}

// --results_dir: the cell's directory, made or found. Locked for this
// run (flock on DIR/lock: released by the kernel however the process
// ends), so two tasks given the same cell never write one events.jsonl
// together. A directory with records is resumed in place (inv->resume);
// one whose selected cells all have a result and a footer is done: *done,
// nothing written.
int PrepareCellDir(Invocation* inv, RunDir* dir, bool* done) {
  *done = false;
  if (absl::Status s = rsslab::MakeDirs(inv->out); !s.ok()) {
    return Fail(kExitFailed, absl::StrCat("--results_dir: ", s.message()));
  }
  const std::string lock = inv->out + "/lock";
  dir->lock_fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (dir->lock_fd < 0) {
    return Fail(kExitFailed, absl::StrCat("--results_dir: cannot open ", lock, ": ",
                                          strerror(errno)));
  }
  if (flock(dir->lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return Fail(kExitUsage,
                absl::StrCat("--results_dir: another rsslab_loadgen is running these cells in ",
                             inv->out, " (it holds ", lock, "); nothing run"));
  }
  const std::string events = inv->out + "/events.jsonl";
  struct stat st;
  if (lstat(events.c_str(), &st) != 0) return 0;  // a fresh directory
  int unreadable = 0;
  auto before = rsslab::ReadEvents(inv->out, &unreadable);
  if (before.ok() && before->empty() && S_ISREG(st.st_mode) && st.st_size < 4096) {
    // Killed before its header was written: nothing to keep.
    unlink(events.c_str());
    return 0;
  }
  inv->resume = true;  // ReopenRunDir checks the header and says what differs
  if (!before.ok() || before->empty() || !before->back().has_footer()) return 0;
  const std::set<std::string> ok = rsslab::SuccessfulCells(*before);
  const std::vector<rsslab::SweepCell> all = rsslab::ExpandCells(inv->scenario.sweep());
  for (size_t i = 0; i < all.size(); ++i) {
    const bool selected = inv->cells.empty() ||
                          std::find(inv->cells.begin(), inv->cells.end(), static_cast<int>(i)) !=
                              inv->cells.end();
    if (selected && ok.count(all[i].id) == 0) return 0;
  }
  if (auto s = rsslab::CheckResumable(before->front(), inv->scenario, inv->flags); !s.ok()) {
    return 0;  // ReopenRunDir refuses it, saying why
  }
  fprintf(stderr,
          "rsslab_loadgen: %s already holds a result for every cell it runs (records kept); "
          "nothing to run\n",
          inv->out.c_str());
  *done = true;
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
  // Counted over the cells this command runs (a batch task's --cells), not
  // the whole matrix.
  const std::vector<rsslab::SweepCell> all = rsslab::ExpandCells(inv.scenario.sweep());
  int total = 0, done = 0;
  for (const rsslab::SweepCell& c : all) {
    if (!inv.cells.empty() &&
        std::find(inv.cells.begin(), inv.cells.end(), c.index) == inv.cells.end()) {
      continue;
    }
    ++total;
    done += dir->done_cells.count(c.id) > 0 ? 1 : 0;
  }
  fprintf(stderr, "rsslab_loadgen: resuming %s: %d of %d cells already done (kept), %d to run%s\n",
          inv.out.c_str(), done, total, total - done, torn.c_str());
}

rsslab::v1::Event Header(const Invocation& inv) {
  rsslab::v1::Event header;
  auto* h = header.mutable_header();
  h->set_scenario_name(inv.scenario.name());
  *h->mutable_scenario() = inv.scenario;
  for (const auto& a : inv.argv) h->add_argv(a);
  h->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  h->set_target(absl::GetFlag(FLAGS_target));
  h->set_control(rsslab::EffectiveControl(absl::GetFlag(FLAGS_control), inv.calls));
  h->set_loadgen_version("rsslab_loadgen 0.1");
  h->set_hostname(Hostname());
  *h->mutable_flags() = inv.flags;
  if (inv.scenario.has_sweep()) {
    h->set_agent(RecordedAgent(inv));
    if (inv.agents.size() > 1) {
      for (const std::string& a : inv.agents) h->add_agents(a);
    }
    h->clear_target();
    h->clear_control();
    h->set_matrix_id(inv.matrix_id);
    h->set_cells_total(inv.cells_total);
    for (int c : inv.cells) h->add_cells_selected(c);
    h->set_local(inv.local);
    rsslab::v1::HostInfo* where = h->mutable_host();
    *where = rsslab::HostInfoOf(rsslab::CurrentHost());
    where->set_server_cpus(rsslab::FormatCpuList(inv.cpus.server));
    where->set_loadgen_cpus(rsslab::FormatCpuList(inv.cpus.loadgen));
  }
  return header;
}

// A new run: an empty directory and its header record. A resumed one: its
// records so far kept, a `resumed` record appended.
int OpenRunDir(const Invocation& inv, RunDir* dir) {
  if (inv.resume) {
    if (int rc = ReopenRunDir(inv, dir); rc != 0) return rc;
  } else {
    // A --results_dir cell directory is this run's (made and locked by
    // PrepareCellDir, its lock file in it); EventLog::Create still refuses
    // an events.jsonl there.
    if (auto s = inv.in_place ? absl::OkStatus() : rsslab::CheckRunDirEmpty(inv.out); !s.ok()) {
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

// A sweep's hosts, each checked (reachable, knows every profile) before the
// run directory exists: a bad agent list is a usage error with nothing run.
int PrepareHosts(const Invocation& inv, std::vector<std::unique_ptr<rsslab::CellHost>>* hosts) {
  if (inv.local) {
    rsslab::LocalHostOptions lo;
    lo.commands = inv.commands;
    lo.server_binary = absl::GetFlag(FLAGS_server_binary);
    if (lo.server_binary.empty()) lo.server_binary = rsslab::FindShipped("bin/rsslab_server");
    if (lo.server_binary.empty()) lo.server_binary = rsslab::FindShipped("server/rsslab_server");
    const bool command = !inv.scenario.sweep().command().empty();
    if (!command && (lo.server_binary.empty() || access(lo.server_binary.c_str(), X_OK) != 0)) {
      return Fail(kExitUsage, absl::StrCat("--local: no rsslab_server to run",
                                           lo.server_binary.empty() ? "" : " at ",
                                           lo.server_binary, "; pass --server_binary=PATH"));
    }
    std::string pf = absl::GetFlag(FLAGS_profile_file);
    if (pf.empty()) pf = rsslab::FindShipped("agent/profiles.textproto");
    if (pf.empty()) {
      return Fail(kExitUsage, "--local: cannot find agent/profiles.textproto; pass --profile_file=FILE");
    }
    absl::StatusOr<rsslab::v1::ProfileSet> set = rsslab::profiles::LoadProfiles(pf);
    if (!set.ok()) return Fail(kExitUsage, absl::StrCat("--profile_file: ", set.status().message()));
    lo.profiles = *std::move(set);
    for (absl::string_view d :
         absl::StrSplit(absl::GetFlag(FLAGS_handler_dirs), ',', absl::SkipWhitespace())) {
      lo.handler_dirs.emplace_back(d);
    }
    if (lo.handler_dirs.empty()) {
      const std::string d = rsslab::FindShipped(rsslab::kHandlersDir);
      if (!d.empty()) lo.handler_dirs.push_back(d);
    }
    lo.log_dir = inv.out + "/servers";
    lo.server_cpus = inv.cpus.server;
    lo.loadgen_cpus = inv.cpus.loadgen;
    hosts->push_back(rsslab::MakeLocalHost(std::move(lo)));
  } else {
    for (const std::string& a : inv.agents) {
      rsslab::AgentHostOptions ao;
      ao.address = a;
      ao.security = &inv.security;
      hosts->push_back(rsslab::MakeAgentHost(ao));
    }
  }
  return 0;
}

// Every host reachable and knowing every profile. Checked one by one but
// together: each unreachable agent costs its connect timeout once, not once
// per agent in turn.
absl::Status CheckHosts(const Invocation& inv,
                        const std::vector<std::unique_ptr<rsslab::CellHost>>& hosts) {
  std::vector<absl::Status> ready(hosts.size());
  std::vector<std::thread> checks;
  for (size_t i = 0; i < hosts.size(); ++i) {
    checks.emplace_back([&, i] { ready[i] = hosts[i]->Prepare(inv.scenario.sweep()); });
  }
  for (std::thread& t : checks) t.join();
  std::vector<std::string> bad;
  absl::StatusCode code = absl::StatusCode::kOk;
  for (const absl::Status& st : ready) {
    if (st.ok()) continue;
    bad.emplace_back(st.message());
    // An unknown profile is the command's mistake (NOT_FOUND, exit 2).
    if (code == absl::StatusCode::kOk || st.code() == absl::StatusCode::kNotFound) code = st.code();
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::Status(code, absl::StrJoin(bad, "; "));
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
  int hosts = 0;         // sweep: agents (or 1, --local)
  int requeued = 0;      // sweep: attempts lost to their host and run again
  double busy_seconds = 0;  // sweep: every attempt's length, summed
  std::vector<std::string> lost_hosts;
};

rsslab::Runner::Options RunnerOptions(const Invocation& inv, const RunDir& dir, Metrics* metrics) {
  rsslab::Runner::Options ro;
  ro.target = absl::GetFlag(FLAGS_target);
  ro.control = rsslab::EffectiveControl(absl::GetFlag(FLAGS_control), inv.calls);
  ro.calls = inv.calls.set.get();
  ro.metadata = inv.calls.metadata;
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
                std::vector<std::unique_ptr<rsslab::CellHost>> hosts,
                const rsslab::StopFlag* stop) {
  Outcome o;
  o.start = absl::Now();
  rsslab::Runner::Options ro = RunnerOptions(inv, *dir, metrics);
  if (inv.scenario.has_sweep()) {
    o.sweep = true;
    o.hosts = static_cast<int>(hosts.size());
    // Several cells at once: one line per event, never a live line.
    if (hosts.size() > 1 && ro.progress == rsslab::ProgressMode::kLive) {
      ro.progress = rsslab::ProgressMode::kLines;
    }
    rsslab::SweepOptions so;
    so.hosts = std::move(hosts);
    so.runner = ro;
    so.cells = inv.cells;
    so.done_cells = dir->done_cells;
    so.max_attempts = absl::GetFlag(FLAGS_cell_attempts);
    absl::StatusOr<rsslab::SweepOutcome> r =
        rsslab::RunSweep(so, inv.scenario, inv.plan, dir->log.get(), stop);
    o.status = r.status();
    if (r.ok()) {
      o.interrupted = r->interrupted;
      o.cells = r->cells;
      o.failed_cells = r->failed;
      o.requeued = r->requeued;
      o.busy_seconds = r->busy_seconds;
      o.lost_hosts = r->lost_hosts;
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
  if (!o.lost_hosts.empty()) {
    f->set_error(absl::StrCat(f->error(), f->error().empty() ? "" : "; ", "agents lost: ",
                              absl::StrJoin(o.lost_hosts, "; ")));
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
  // Some cells of a matrix (a batch task's): the plots and advice belong to
  // the merge of all of them.
  if (inv.cells.empty()) rsslab::PlotAndAdvise(inv.out);
  const bool plots = access((inv.out + "/rss_under_load.png").c_str(), R_OK) == 0;
  printf("sweep: %zu cells, %d failed, %.0f s\nrun directory: %s (events.jsonl, summary.md, "
         "summary.csv%s)\n",
         sw.cells.size(), sw.failed_cells, absl::ToDoubleSeconds(absl::Now() - o.start),
         inv.out.c_str(), plots ? ", rss_under_load.png, rss_after_shrink.png" : "");
  // Scheduling efficiency: how much of the hosts' time went into cells.
  const double wall = absl::ToDoubleSeconds(absl::Now() - o.start);
  if (o.hosts > 0 && wall > 0) {
    printf("sweep: %d host(s), cells busy %.1f s of %d x %.1f s wall: scheduling efficiency "
           "%.2f%s\n",
           o.hosts, o.busy_seconds, o.hosts, wall, o.busy_seconds / (o.hosts * wall),
           o.requeued > 0 ? absl::StrFormat("; %d attempt(s) re-queued", o.requeued).c_str() : "");
  }
  if (!o.lost_hosts.empty()) {
    printf("sweep: agents lost: %s\n", absl::StrJoin(o.lost_hosts, "; ").c_str());
  }
  fflush(stdout);
  return written;
}

absl::Status SummarizeRun(const Invocation& inv, const rsslab::RunSummary& summary) {
  absl::Status written = rsslab::WriteSummary(inv.out, summary);
  printf("%s", rsslab::SummaryTable({summary}, {inv.out}).c_str());
  if (summary.soak.enabled) {
    PrintSoak(summary.soak);
    rsslab::PlotAndAdvise(inv.out);  // plots, when python3 + matplotlib are here
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

// `merge --out=DIR RUN_DIR...`
void SetUsage() {
  absl::FlagsUsageConfig cfg;
  cfg.contains_help_flags = [](absl::string_view f) {
    return absl::StrContains(f, "loadgen/");
  };
  cfg.contains_helpshort_flags = cfg.contains_help_flags;
  absl::SetFlagsUsageConfig(cfg);
  absl::SetProgramUsageMessage(
      "drives an rsslab_server over gRPC and scripts its phases.\n"
      "  rsslab_loadgen [run] --builtin=seed [--scale=0.1] [--target=H:P --control=H:P]\n"
      "  rsslab_loadgen --scenario=FILE | --requests=N | --duration=30s [load flags]\n"
      "  rsslab_loadgen --builtin=sweep --agent=H:P [--profiles=a,b --threads_list=1,4 --repeats=N]\n"
      "  rsslab_loadgen sweep ...   the same as --builtin=sweep ...\n"
      "  rsslab_loadgen --builtin=sweep ... --print_cells [--json]   the numbered cells\n"
      "  rsslab_loadgen --builtin=sweep ... --cells=3 --local [--results_dir=DIR]   one cell here\n"
      "  rsslab_loadgen merge --out=DIR RUN_DIR...   one sweep from run directories of one matrix\n"
      "  rsslab_loadgen report RUN_DIR...   rebuild summaries from events.jsonl\n"
      "  rsslab_loadgen compare BASE NEW [--fail_if='rss_after_idle>+10%'] [--format=md|--json]");
}

// --print_builtin=NAME: the built-in scenario's text.
int PrintBuiltin() {
  auto text = rsslab::BuiltinText(absl::GetFlag(FLAGS_print_builtin));
  if (!text.ok()) return Fail(kExitUsage, text.status().message());
  printf("%s", text->c_str());
  return 0;
}

// --print_cells: the matrix's numbered cells, as text or JSON.
int PrintCells(const Invocation& inv) {
  const std::vector<rsslab::SweepCell> cells = rsslab::ExpandCells(inv.scenario.sweep());
  if (absl::GetFlag(FLAGS_json)) {
    printf("%s", rsslab::CellsJson(cells, inv.matrix_id).c_str());
  } else {
    printf("# matrix %s: %zu cells (repeats outermost, then threads, then profiles)\n%s",
           inv.matrix_id.c_str(), cells.size(), rsslab::CellsText(cells).c_str());
  }
  return 0;
}

// A sweep's hosts, made and (for several agents or --local) checked before
// the run directory exists, so a bad list is a usage error with nothing
// run. One agent is checked inside the run instead (RunMain): its header
// records what was asked (and --resume checks it), the footer why it could
// not run.
int HostsBeforeTheRun(const Invocation& inv, std::vector<std::unique_ptr<rsslab::CellHost>>* hosts,
                      bool* checked) {
  *checked = false;
  if (!inv.scenario.has_sweep()) return 0;
  if (inv.local && !inv.cpus.loadgen.empty()) {
    // Before any cell: the loadgen's threads (and those it makes later)
    // stay off the server's CPUs.
    if (absl::Status s = rsslab::PinProcess(inv.cpus.loadgen); !s.ok()) {
      return Fail(kExitUsage, s.message());
    }
  }
  if (int rc = PrepareHosts(inv, hosts); rc != 0) return rc;
  if (!inv.local && hosts->size() <= 1) return 0;
  *checked = true;
  if (absl::Status s = CheckHosts(inv, *hosts); !s.ok()) {
    return Fail(kExitUsage, absl::StrCat(s.message(), "; nothing run"));
  }
  return 0;
}

// `rsslab_loadgen [run]`: a scenario (or a sweep of them) against a server.
int RunMain(int argc, char** argv, const sigset_t& sigs) {
  if (!absl::GetFlag(FLAGS_print_builtin).empty()) return PrintBuiltin();
  absl::StatusOr<Invocation> inv = ParseInvocation(std::vector<std::string>(argv, argv + argc));
  if (!inv.ok()) return Fail(kExitUsage, inv.status().message());
  if (absl::GetFlag(FLAGS_print_cells)) return PrintCells(*inv);
  std::vector<std::unique_ptr<rsslab::CellHost>> hosts;
  bool checked = false;
  if (int rc = HostsBeforeTheRun(*inv, &hosts, &checked); rc != 0) return rc;
  Metrics metrics;
  if (int rc = OpenMetrics(*inv, &metrics); rc != 0) return rc;
  RunDir dir;
  if (inv->in_place) {
    bool done = false;
    if (int rc = PrepareCellDir(&*inv, &dir, &done); rc != 0 || done) return rc;
  }
  if (int rc = OpenRunDir(*inv, &dir); rc != 0) return rc;
  rsslab::StopFlag stop;
  StopOnSignals(sigs, &stop);
  Outcome outcome;
  const bool sweep = inv->scenario.has_sweep();
  const absl::Status ready = sweep && !checked ? CheckHosts(*inv, hosts) : absl::OkStatus();
  if (ready.ok()) {
    outcome = Execute(*inv, &dir, &metrics, std::move(hosts), &stop);
  } else {
    outcome.sweep = true;
    outcome.start = absl::Now();
    outcome.status = ready;
  }
  return Finish(*inv, outcome, &dir, &metrics, stop);
}

}  // namespace

// A thin dispatcher: each subcommand parses nothing more and returns its
// own exit code. No subcommand (or `run`) runs a scenario or a sweep.
int main(int argc, char** argv) {
  // Before any thread exists: see StopOnSignals.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  SetUsage();
  std::vector<char*> pos = rsslab::ParseFlags(argc, argv);
  const std::string sub = pos.size() >= 2 ? pos[1] : "";
  const std::vector<std::string> rest(pos.begin() + std::min<size_t>(pos.size(), 2), pos.end());
  if (sub == "compare") return rsslab::CompareMain(rest, std::vector<std::string>(argv, argv + argc));
  if (sub == "report") return rsslab::ReportMain(rest);
  if (sub == "merge") return rsslab::MergeMain(rest, absl::GetFlag(FLAGS_out));
  if (sub == "run" && rest.empty()) return RunMain(argc, argv, sigs);
  // `sweep` = `--builtin=sweep` (the spelling scripts and deploy files use).
  if (sub == "sweep" && rest.empty()) {
    const std::string b = absl::GetFlag(FLAGS_builtin);
    if (!b.empty() && b != "sweep") {
      return Fail(kExitUsage, absl::StrFormat("sweep runs --builtin=sweep, not --builtin=%s", b));
    }
    absl::SetFlag(&FLAGS_builtin, "sweep");
    return RunMain(argc, argv, sigs);
  }
  if (!sub.empty()) {
    return Fail(kExitUsage, absl::StrFormat("unexpected argument \"%s\" (see --help)",
                                            (sub == "run" || sub == "sweep") ? rest[0] : sub));
  }
  return RunMain(argc, argv, sigs);
}
