#include "loadgen/run/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/host_info.h"
#include "loadgen/results/cells.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/run/run_flags.h"
#include "loadgen/sweep/cell_host.h"
#include "loadgen/sweep/resume_identity.h"

namespace rsslab {
namespace run {
namespace {

using rsslab::cli::Fail;
constexpr int kExitFailed = rsslab::cli::kExitFailed;
constexpr int kExitUsage = rsslab::cli::kExitUsage;

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

}  // namespace

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

}  // namespace run
}  // namespace rsslab
