#include "loadgen/run/hosts.h"

#include <unistd.h>

#include <string>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/profiles.h"
#include "common/host_info.h"
#include "common/shipped.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/run/run_flags.h"
#include "loadgen/sweep/sweep_flags.h"

namespace rsslab {
namespace run {
namespace {

using rsslab::cli::Fail;
constexpr int kExitUsage = rsslab::cli::kExitUsage;

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
    const int log_max_mb = absl::GetFlag(FLAGS_log_max_mb);
    if (log_max_mb < 0 || log_max_mb > 65536) {
      return Fail(kExitUsage, absl::StrCat("--log_max_mb=", log_max_mb,
                                           " is out of range (0, or 1 to 65536 MiB)"));
    }
    lo.log_max_bytes = int64_t{log_max_mb} << 20;
    lo.log_writer_binary = "/proc/self/exe";  // main() runs the writer when asked
    lo.server_cpus = inv.cpus.server;
    lo.loadgen_cpus = inv.cpus.loadgen;
    hosts->push_back(rsslab::MakeLocalHost(std::move(lo)));
  } else {
    for (const std::string& a : inv.agents) {
      rsslab::AgentHostOptions ao;
      ao.address = a;
      ao.security = &inv.security;
      ao.max_receive_mb = absl::GetFlag(FLAGS_max_receive_mb);
      hosts->push_back(rsslab::MakeAgentHost(ao));
    }
  }
  return 0;
}

}  // namespace

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

}  // namespace run
}  // namespace rsslab
