// The check both launchers (rsslab_run and the agent) make once a server
// printed its ready line: the profile took effect (/proc) and the server
// reports the allocator the profile names (Control).
//
// Example:
//   absl::StatusOr<rsslab::launch::VerifiedLaunch> v =
//       rsslab::launch::VerifyLaunch(pid, profile, ready_line, &security);
//   if (!v.ok()) return v.status();  // its code says which step failed
#ifndef RSSLAB_AGENT_VERIFY_LAUNCH_H_
#define RSSLAB_AGENT_VERIFY_LAUNCH_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "agent/profiles.h"
#include "common/auth.h"
#include "common/ready_line.h"
#include "proto/profile.pb.h"

namespace rsslab {
namespace launch {

// What VerifyLaunch established about a started server.
struct VerifiedLaunch {
  ReadyLine ready;
  profiles::Verification verification;
};

// The one check both launchers (rsslab_run and the agent) make once a
// server printed its ready line: the line parses, /proc/PID shows the
// profile's library and environment, and the allocator the server itself
// reports over Control matches. The code says which step failed: INTERNAL
// (the line), FAILED_PRECONDITION (the profile did not take effect),
// UNAVAILABLE (the server did not answer). `security` may be null.
absl::StatusOr<VerifiedLaunch> VerifyLaunch(pid_t pid, const v1::Profile& profile,
                                            absl::string_view ready_line,
                                            const Security* security,
                                            absl::Duration rpc_timeout = absl::Seconds(10));

// GetSnapshot over the Control service: the allocator the server reports.
// `security` (optional) supplies TLS and the token when the server needs them.
absl::StatusOr<std::string> ReportedAllocator(const std::string& control_address,
                                              absl::Duration timeout,
                                              const Security* security = nullptr);

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_VERIFY_LAUNCH_H_
