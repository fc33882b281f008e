// How a launched program's end reads once someone asked it to stop: the one
// rule the sweep (through an agent or --local) and rsslab_run apply.
//
//   absl::StatusOr<std::vector<int>> ok = rsslab::launch::ParseOkExitCodes("0,143");
//   rsslab::launch::StopVerdict v = rsslab::launch::JudgeStop(
//       {.ended_before_stop = false, .exit_code = -1, .term_signal = SIGTERM}, *ok);
//   // v.ending == Ending::kNormalStop: Python's default death on SIGTERM
//
// After Stop's SIGTERM, death by SIGTERM (what a Python program without a
// handler does) and an exit code in the declared list are a normal stop;
// SIGKILL (it outlived the grace period), another code or signal is not. A
// program that had ended before Stop came died on its own, whatever its
// status: what it measured before that stays, marked.
#ifndef RSSLAB_AGENT_STOP_OUTCOME_H_
#define RSSLAB_AGENT_STOP_OUTCOME_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace launch {

// The default of --ok_exit_codes.
inline constexpr char kDefaultOkExitCodes[] = "0";

// "0,143": comma-separated exit codes 0..255, at most 32, none twice.
// INVALID_ARGUMENT naming `flag` and the bad item.
absl::StatusOr<std::vector<int>> ParseOkExitCodes(absl::string_view list,
                                                  absl::string_view flag = "--ok_exit_codes");

struct Ended {
  bool ended_before_stop = false;
  int exit_code = -1;   // -1: it did not exit (a signal, or unknown)
  int term_signal = 0;  // 0: no signal
};

enum class Ending {
  kNormalStop,      // after Stop: SIGTERM's death or a declared exit code
  kBadStop,         // after Stop, but another code, SIGKILL, or unknown
  kDiedBeforeStop,  // it had ended before Stop
};

struct StopVerdict {
  Ending ending = Ending::kBadStop;
  // Why it is not a normal stop ("" for one): "exited 1 after stop (not in
  // --ok_exit_codes=0)", "killed by SIGKILL after stop (it did not exit
  // within the grace period)", "died before stop".
  std::string why;
};

StopVerdict JudgeStop(const Ended& e, const std::vector<int>& ok_exit_codes);

// Whether `pid` has ended or is ending before anyone reaped it: gone, a
// zombie, or past the start of its exit (PF_EXITING in /proc/PID/stat).
// A stopper asks this before its SIGTERM: a program whose death the caller
// already saw (its sockets closed) may not be reaped yet.
bool EndedOrEnding(int pid);

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_STOP_OUTCOME_H_
