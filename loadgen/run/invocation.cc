#include "loadgen/run/invocation.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/stop_outcome.h"
#include "common/handler_params.h"
#include "common/metrics/http_server.h"
#include "control/registry_flags.h"
#include "loadgen/flags_check.h"
#include "loadgen/http/http_flags.h"
#include "loadgen/results/cells.h"
#include "loadgen/run/run_flags.h"
#include "loadgen/scenario.h"
#include "loadgen/sweep/agents_list.h"
#include "loadgen/sweep/sweep.h"
#include "loadgen/sweep/sweep_flags.h"

namespace rsslab {
namespace run {
namespace {

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
          {absl::GetFlag(FLAGS_client_threads), absl::GetFlag(FLAGS_max_receive_mb),
           absl::GetFlag(FLAGS_connect_timeout),
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
  if (const absl::Duration wait = absl::GetFlag(FLAGS_wait); wait != absl::ZeroDuration()) {
    // Checked as a Duration, before it becomes seconds.
    if (wait < absl::Milliseconds(1) || wait > absl::Hours(24)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--wait=", absl::FormatDuration(wait), ": a wait step lasts 1ms to 24h (0: as the "
          "scenario says)"));
    }
    rsslab::ApplyWaitSeconds(&*scenario, absl::ToDoubleSeconds(wait));
  }
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
  absl::StatusOr<std::vector<int>> ok_codes =
      rsslab::launch::ParseOkExitCodes(absl::GetFlag(FLAGS_ok_exit_codes));
  if (!ok_codes.ok()) return ok_codes.status();
  inv->ok_exit_codes = *std::move(ok_codes);
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

}  // namespace

absl::StatusOr<Invocation> ParseInvocation(std::vector<std::string> argv) {
  Invocation inv;
  inv.argv = std::move(argv);
  absl::StatusOr<rsslab::v1::LoadSpec> flags = FlagSpec();
  if (!flags.ok()) return flags.status();
  inv.flags = *std::move(flags);
  if (absl::Status s = rsslab::http::ApplyHttpFlags(absl::GetFlag(FLAGS_target), &inv.flags);
      !s.ok()) {
    return s;
  }
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
  absl::StatusOr<std::shared_ptr<const rsslab::http::Target>> http =
      rsslab::http::LoadHttpFlags(absl::GetFlag(FLAGS_target), inv.argv);
  if (!http.ok()) return http.status();
  inv.http = *std::move(http);
  if (inv.http != nullptr && inv.calls.any_call) {
    return absl::InvalidArgumentError(
        "--call names a gRPC method, --target an HTTP server: drive one or the other");
  }
  absl::StatusOr<rsslab::ProgressMode> progress = ProgressFlag();
  if (!progress.ok()) return progress.status();
  inv.progress = *progress;
  if (absl::Status s = CheckClientFlags(); !s.ok()) return s;
  // Credentials are read before the run directory exists: a bad file is a
  // usage error with nothing written.
  absl::StatusOr<rsslab::Security> security = rsslab::Security::FromFlags();
  if (!security.ok()) return security.status();
  inv.security = *std::move(security);
  absl::StatusOr<rsslab::registry::Trust> trust = rsslab::registry::TrustFromFlags();
  if (!trust.ok()) return trust.status();
  inv.control_trust = *std::move(trust);
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

std::string RecordedAgent(const Invocation& inv) {
  return inv.local ? "local" : absl::StrJoin(inv.agents, ",");
}

}  // namespace run
}  // namespace rsslab
