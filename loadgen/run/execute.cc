#include "loadgen/run/execute.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "loadgen/call_flags.h"
#include "loadgen/results/cli.h"
#include "loadgen/run/run_flags.h"
#include "loadgen/runner.h"
#include "loadgen/sweep/sweep.h"
#include "loadgen/sweep/sweep_flags.h"

namespace rsslab {
namespace run {
namespace {

constexpr int kExitInterrupted = rsslab::cli::kExitInterrupted;

rsslab::Runner::Options RunnerOptions(const Invocation& inv, const RunDir& dir, Metrics* metrics) {
  rsslab::Runner::Options ro;
  ro.target = absl::GetFlag(FLAGS_target);
  // An HTTP service has no Control unless --control names it (all:NAME for
  // the package's workers), as for the user's own gRPC calls.
  ro.control = inv.http != nullptr && !inv.calls.control_given
                   ? ""
                   : rsslab::EffectiveControl(absl::GetFlag(FLAGS_control), inv.calls);
  ro.http = inv.http;
  ro.calls = inv.calls.set.get();
  ro.metadata = inv.calls.metadata;
  ro.flags = inv.flags;
  ro.max_errors = absl::GetFlag(FLAGS_max_errors);
  ro.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  ro.client_threads = absl::GetFlag(FLAGS_client_threads);
  ro.max_receive_mb = absl::GetFlag(FLAGS_max_receive_mb);
  ro.callback_api = absl::GetFlag(FLAGS_client_api) == "callback";
  ro.control_timeout = absl::GetFlag(FLAGS_control_timeout);
  ro.progress = inv.progress;
  ro.security = &inv.security;
  ro.control_trust = inv.control_trust;
  if (metrics->http != nullptr) ro.metrics = &metrics->values;
  if (inv.resume && inv.scenario.has_soak()) {
    ro.first_cycle = dir.soak_resume.first_cycle;
    ro.repeat_started = dir.soak_resume.started;
  }
  return ro;
}

}  // namespace

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
    so.ok_exit_codes = inv.ok_exit_codes;
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

}  // namespace run
}  // namespace rsslab
