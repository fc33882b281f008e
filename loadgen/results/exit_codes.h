// What every rsslab_loadgen subcommand shares at its edge: the exit codes,
// the one way an error is printed, and the mapping from a Status to an
// exit code (the subcommands work with Status inside and turn it into an
// exit code only when they return to main).
//
//   absl::Status s = DoTheWork();
//   if (!s.ok()) return rsslab::cli::Fail(rsslab::cli::ExitCodeOf(s), s.message());
#ifndef RSSLAB_LOADGEN_RESULTS_EXIT_CODES_H_
#define RSSLAB_LOADGEN_RESULTS_EXIT_CODES_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;       // a step, the run or a check failed
inline constexpr int kExitUsage = 2;        // bad input; nothing was sent or written
inline constexpr int kExitInterrupted = 130;

// Each line of `msg` on stderr as "rsslab_loadgen: LINE", escaped and capped
// (common/untrusted_text.h), at most 40 lines; returns `code`.
int Fail(int code, absl::string_view msg);
// INVALID_ARGUMENT: kExitUsage; any other error: kExitFailed; OK: kExitOk.
int ExitCodeOf(const absl::Status& s);

}  // namespace cli
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_EXIT_CODES_H_
