// What --resume checks beyond the scenario and the load flags (which
// CheckResumable compares): the run's identity, i.e. whom it measured. A
// soak resumed with another --target (or --control, or a sweep with another
// --agent) would merge two servers' records into one run.
//
//   if (auto s = CheckResumeIdentity(header_event.header(), now); !s.ok()) ... exit 2

#ifndef RSSLAB_LOADGEN_SWEEP_RESUME_IDENTITY_H_
#define RSSLAB_LOADGEN_SWEEP_RESUME_IDENTITY_H_

#include <string>

#include "absl/status/status.h"
#include "proto/results.pb.h"

namespace rsslab {

struct RunIdentity {
  bool sweep = false;     // sweeps record the agent, not target/control
  std::string target;
  std::string control;
  std::string agent;
};

absl::Status CheckResumeIdentity(const rsslab::v1::Header& was, const RunIdentity& now);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_SWEEP_RESUME_IDENTITY_H_
