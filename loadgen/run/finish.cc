#include "loadgen/run/finish.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/results/event_log.h"
#include "loadgen/results/report_main.h"
#include "loadgen/results/summary.h"
#include "loadgen/results/summary_render.h"
#include "loadgen/results/sweep_summary.h"
#include "loadgen/run/run_flags.h"

namespace rsslab {
namespace run {
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

}  // namespace

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

}  // namespace run
}  // namespace rsslab
