// A sweep's cell hosts: the agents of --agent / --agents_file, or this
// machine for --local (its server binary, profiles and handler directories
// found), and the check that each is reachable and knows every profile.
//
//   std::vector<std::unique_ptr<rsslab::CellHost>> hosts;
//   bool checked = false;
//   if (int rc = rsslab::run::HostsBeforeTheRun(inv, &hosts, &checked); rc != 0) return rc;
#ifndef RSSLAB_LOADGEN_RUN_HOSTS_H_
#define RSSLAB_LOADGEN_RUN_HOSTS_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "loadgen/run/invocation.h"
#include "loadgen/sweep/cell_host.h"

namespace rsslab {
namespace run {

// A sweep's hosts, made and (for several agents or --local) checked before
// the run directory exists, so a bad list is a usage error with nothing
// run (*checked then true). One agent is checked inside the run instead
// (RunMain): its header records what was asked (and --resume checks it),
// the footer why it could not run. --local pins this process to its
// --loadgen_cpus first. Not a sweep: nothing made. Returns the exit code to
// stop with, 0 to go on.
int HostsBeforeTheRun(const Invocation& inv, std::vector<std::unique_ptr<rsslab::CellHost>>* hosts,
                      bool* checked);

// Every host reachable and knowing every profile. Checked one by one but
// together: each unreachable agent costs its connect timeout once, not once
// per agent in turn. NOT_FOUND (an unknown profile) wins over other codes.
absl::Status CheckHosts(const Invocation& inv,
                        const std::vector<std::unique_ptr<rsslab::CellHost>>& hosts);

}  // namespace run
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RUN_HOSTS_H_
