#include "loadgen/sweep.h"

#include <stdio.h>

#include <algorithm>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/agent.grpc.pb.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Event;
using ::rsslab::v1::Scenario;

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(s, absl::ByAnyChar(", "), absl::SkipEmpty())) {
    out.emplace_back(p);
  }
  return out;
}

void Progress(const Runner::Options& o, const std::string& text) {
  PrintProgressLine(o.progress, text);
}

std::string FirstLine(absl::string_view s) {
  return std::string(s.substr(0, s.find('\n')));
}

}  // namespace

std::string CellId(const std::string& profile, int threads, int repeat) {
  return absl::StrFormat("%s/t%d/r%d", profile, threads, repeat);
}

absl::Status ApplySweepOverrides(Scenario* scenario, const std::string& profiles,
                                 const std::string& threads, int repeats) {
  auto* sw = scenario->mutable_sweep();
  if (!profiles.empty()) {
    sw->clear_profiles();
    for (const std::string& p : SplitList(profiles)) sw->add_profiles(p);
  }
  if (!threads.empty()) {
    sw->clear_threads();
    for (const std::string& t : SplitList(threads)) {
      int n = 0;
      if (!absl::SimpleAtoi(t, &n) || n < 1 || n > 1024) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--threads_list: \"%s\" is not a thread count in 1..1024", t));
      }
      sw->add_threads(n);
    }
  }
  if (repeats < 0 || repeats > 1000) {
    return absl::InvalidArgumentError("--repeats must be in 1..1000");
  }
  if (repeats > 0) sw->set_repeats(repeats);
  if (sw->profiles_size() == 0 || sw->threads_size() == 0) {
    return absl::InvalidArgumentError(
        "the sweep needs at least one profile and one thread count");
  }
  return absl::OkStatus();
}

namespace {

// One sweep under way: the agent, and what every cell shares.
class SweepRun {
 public:
  SweepRun(const SweepOptions& options, const Scenario& scenario, const Plan& plan,
           EventLog* log, const StopFlag* stop)
      : options_(options), scenario_(scenario), plan_(plan), log_(log), stop_(stop) {}

  // Reaches the agent and checks it knows every profile: unknown ones fail
  // here (NOT_FOUND), before the first of many cells runs.
  absl::Status Connect();

  struct CellEnd {
    bool ok = false;
    bool interrupted = false;
  };
  // One cell: a fresh server launched, the plan run against it, the server
  // stopped, and the cell_result record. An error status means the sweep
  // cannot go on (the log cannot be written, the agent is gone).
  absl::StatusOr<CellEnd> RunCell(const Event& tag, const std::string& head);

 private:
  absl::StatusOr<CellEnd> LaunchFailed(const grpc::Status& ls, const std::string& head,
                                       Event* result);
  absl::Status RunPlan(const Event& tag, const rsslab::v1::ServerProcess& server);
  grpc::Status StopServer(const std::string& id, rsslab::v1::StopResponse* stopped);

  const SweepOptions& options_;
  const Scenario& scenario_;
  const Plan& plan_;
  EventLog* const log_;
  const StopFlag* const stop_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<rsslab::v1::Agent::Stub> agent_;
};

absl::Status SweepRun::Connect() {
  channel_ = options_.runner.security != nullptr
                 ? options_.runner.security->Channel(options_.agent)
                 : grpc::CreateChannel(options_.agent, grpc::InsecureChannelCredentials());
  if (!channel_->WaitForConnected(Deadline(options_.agent_connect_timeout))) {
    return absl::UnavailableError(absl::StrFormat(
        "cannot reach rsslab_agent at %s within %s (start it with "
        "rsslab_agent --listen=... on the server's machine)",
        options_.agent, absl::FormatDuration(options_.agent_connect_timeout)));
  }
  agent_ = rsslab::v1::Agent::NewStub(channel_);
  grpc::ClientContext cc;
  cc.set_deadline(Deadline(absl::Seconds(30)));
  rsslab::v1::ListProfilesResponse known;
  grpc::Status gs = agent_->ListProfiles(&cc, {}, &known);
  if (!gs.ok()) {
    return absl::UnavailableError(absl::StrCat("ListProfiles at ", options_.agent,
                                               " failed: ", gs.error_message()));
  }
  std::vector<std::string> unknown;
  for (const std::string& p : scenario_.sweep().profiles()) {
    if (std::find(known.names().begin(), known.names().end(), p) == known.names().end()) {
      unknown.push_back(p);
    }
  }
  if (!unknown.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "the agent at %s has no profile %s (it has: %s)", options_.agent,
        absl::StrJoin(unknown, ", "), absl::StrJoin(known.names(), ", ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<SweepRun::CellEnd> SweepRun::RunCell(const Event& tag, const std::string& head) {
  const auto& sw = scenario_.sweep();
  Event result = tag;
  auto* cr = result.mutable_cell_result();
  cr->set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));

  rsslab::v1::LaunchRequest lr;
  lr.set_profile(tag.profile());
  lr.set_threads(tag.threads());
  lr.set_handler(sw.handler());
  for (const auto& [k, v] : sw.server_flags()) (*lr.mutable_server_flags())[k] = v;
  lr.set_label(absl::StrCat(scenario_.name(), " ", tag.cell()));
  rsslab::v1::LaunchResponse launched;
  grpc::Status ls;
  {
    grpc::ClientContext cc;
    cc.set_deadline(Deadline(options_.launch_timeout));
    ls = agent_->Launch(&cc, lr, &launched);
  }
  if (!ls.ok()) return LaunchFailed(ls, head, &result);
  const auto& server = launched.server();
  Progress(options_.runner,
           absl::StrFormat("%s: server %s pid %d (%s) data=%s control=%s", head, server.id(),
                           server.pid(),
                           server.mapped_library().empty() ? "glibc" : server.mapped_library(),
                           server.data_address(), server.control_address()));

  const absl::Status run_status = RunPlan(tag, server);
  rsslab::v1::StopResponse stopped;
  const grpc::Status ss = StopServer(server.id(), &stopped);
  *cr->mutable_server() = ss.ok() ? stopped.server() : server;
  const auto& fin = cr->server();
  // A server stopped by us exits 0 after draining; anything else (a crash
  // before or during the steps) makes the cell's figures those of a broken
  // process.
  const bool clean_exit = ss.ok() && fin.exit_code() == 0 && fin.term_signal() == 0;
  cr->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  if (run_status.ok() && clean_exit) {
    cr->set_ok(true);
    cr->set_failed_at("ok");
  } else {
    cr->set_ok(false);
    std::vector<std::string> why;
    if (!ss.ok()) {
      why.push_back(absl::StrCat("Stop: ", ss.error_message()));
    } else if (!clean_exit) {
      why.push_back(absl::StrCat("server ", fin.exit()));
    }
    if (!run_status.ok()) why.push_back(std::string(run_status.message()));
    cr->set_failed_at(!clean_exit ? "exit" : "steps");
    cr->set_error(absl::StrJoin(why, "; "));
  }
  if (absl::Status s = log_->Append(result); !s.ok()) return s;
  Progress(options_.runner,
           absl::StrFormat("%s: %s (server %s)%s", head, cr->ok() ? "ok" : "FAILED",
                           fin.exit().empty() ? "stopped" : fin.exit(),
                           cr->ok() ? "" : absl::StrCat(": ", FirstLine(cr->error()))));
  return CellEnd{cr->ok(), absl::IsCancelled(run_status)};
}

// The agent's message carries the exit status and log tail.
absl::StatusOr<SweepRun::CellEnd> SweepRun::LaunchFailed(const grpc::Status& ls,
                                                         const std::string& head,
                                                         Event* result) {
  auto* cr = result->mutable_cell_result();
  cr->set_ok(false);
  cr->set_failed_at("launch");
  cr->set_error(
      absl::StrCat("Launch: ", StatusCodeName(ls.error_code()), ": ", ls.error_message()));
  cr->set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
  Progress(options_.runner,
           absl::StrCat(head, ": FAILED to launch: ", FirstLine(ls.error_message())));
  if (absl::Status s = log_->Append(*result); !s.ok()) return s;
  if (ls.error_code() == grpc::StatusCode::UNAVAILABLE &&
      channel_->GetState(false) != GRPC_CHANNEL_READY) {
    return absl::UnavailableError(
        absl::StrCat("lost rsslab_agent at ", options_.agent, ": ", ls.error_message()));
  }
  return CellEnd{};
}

absl::Status SweepRun::RunPlan(const Event& tag, const rsslab::v1::ServerProcess& server) {
  Runner::Options ro = options_.runner;
  ro.target = server.data_address();
  ro.control = server.control_address();
  ro.tag = tag;
  ro.line_prefix = absl::StrCat(tag.cell(), " ");
  Runner runner(ro, log_, stop_, /*summary=*/nullptr);
  return runner.Run(plan_);
}

grpc::Status SweepRun::StopServer(const std::string& id, rsslab::v1::StopResponse* stopped) {
  grpc::ClientContext cc;
  cc.set_deadline(Deadline(absl::Milliseconds(options_.stop_grace_ms) + absl::Seconds(30)));
  rsslab::v1::StopRequest sr;
  sr.set_id(id);
  sr.set_grace_ms(options_.stop_grace_ms);
  return agent_->Stop(&cc, sr, stopped);
}

}  // namespace

absl::StatusOr<SweepOutcome> RunSweep(const SweepOptions& options,
                                      const Scenario& scenario, const Plan& plan,
                                      EventLog* log, const StopFlag* stop) {
  SweepRun run(options, scenario, plan, log, stop);
  if (absl::Status s = run.Connect(); !s.ok()) return s;
  const auto& sw = scenario.sweep();
  SweepOutcome out;
  int index = 0;
  const int repeats = std::max<int>(1, sw.repeats());
  const int total = repeats * sw.threads_size() * sw.profiles_size();
  // Repeats outermost, profiles innermost: each repeat sweeps the whole
  // matrix, so a slow drift of the machine (thermal, a neighbour) spreads
  // over every setup instead of biasing the setups that ran last.
  for (int r = 1; r <= repeats; ++r) {
    for (int threads : sw.threads()) {
      for (const std::string& profile : sw.profiles()) {
        if (stop != nullptr && stop->stopped()) {
          out.interrupted = true;
          return out;
        }
        ++index;
        const std::string cell = CellId(profile, threads, r);
        if (options.done_cells.count(cell) != 0) {
          ++out.skipped;
          continue;
        }
        ++out.cells;
        Event tag;
        tag.set_cell(cell);
        tag.set_profile(profile);
        tag.set_threads(threads);
        tag.set_repeat(r);
        absl::StatusOr<SweepRun::CellEnd> end =
            run.RunCell(tag, absl::StrFormat("sweep [%d/%d] %s", index, total, cell));
        if (!end.ok()) return end.status();
        if (!end->ok) ++out.failed;
        if (end->interrupted) {
          out.interrupted = true;
          return out;
        }
      }
    }
  }
  return out;
}

}  // namespace rsslab
