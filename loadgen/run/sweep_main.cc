#include "loadgen/run/sweep_main.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "loadgen/results/exit_codes.h"
#include "loadgen/run/run_main.h"
#include "loadgen/run/run_flags.h"

namespace rsslab {

int SweepMain(int argc, char** argv, const sigset_t& sigs) {
  const std::string b = absl::GetFlag(FLAGS_builtin);
  if (!b.empty() && b != "sweep") {
    return cli::Fail(cli::kExitUsage,
                     absl::StrFormat("sweep runs --builtin=sweep, not --builtin=%s", b));
  }
  absl::SetFlag(&FLAGS_builtin, "sweep");
  return RunMain(argc, argv, sigs);
}

}  // namespace rsslab
