#include "loadgen/sweep/resume_identity.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace rsslab {

absl::Status CheckResumeIdentity(const rsslab::v1::Header& was, const RunIdentity& now) {
  auto differs = [&](const char* flag, const std::string& then, const std::string& today) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "--%s=%s differs from the interrupted run's (%s): a resumed run must measure the same "
        "server; resume with the command line that started it (its header's argv: %s)",
        flag, today, then.empty() ? "unset" : then, absl::StrJoin(was.argv(), " ")));
  };
  if (now.sweep) {
    if (was.agent() != now.agent) return differs("agent", was.agent(), now.agent);
    return absl::OkStatus();
  }
  if (was.target() != now.target) return differs("target", was.target(), now.target);
  if (was.control() != now.control) return differs("control", was.control(), now.control);
  return absl::OkStatus();
}

}  // namespace rsslab
