// The one table of automatic-trim modes and knob ranges. rsslab_server's
// flags (server/run_server.cc, and common/server_flags for the agent and
// rsslab_run), the Python package's rsslab.auto_trim() and
// `python -m rsslab run --auto_trim` all read it, so a value is refused with
// the same bound wherever it comes from; each message names the parameter
// as that caller spells it.
//
// Example:
//   const AutoTrimKnob& k = AutoTrimKnobByKeyword("settle_fraction");
//   CheckAutoTrimValue(k, 1.5, AutoTrimCaller::kServerFlag);
//     // "--auto_trim_settle_fraction must be between 0 and 0.99; got 1.5"
//   CheckAutoTrimValue(k, 1.5, AutoTrimCaller::kPackage);
//     // "auto_trim(settle_fraction=) must be between 0 and 0.99; got 1.5"

#ifndef RSSLAB_COMMON_AUTO_TRIM_TABLE_H_
#define RSSLAB_COMMON_AUTO_TRIM_TABLE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

enum class AutoTrimMode { kOff, kAfterBurst, kInterval };

struct AutoTrimModeEntry {
  const char* name;
  AutoTrimMode mode;
};

// off, after_burst, interval: the one list, in this order.
const std::vector<AutoTrimModeEntry>& AutoTrimModes();

// Who is asking, so a message names what that caller wrote.
enum class AutoTrimCaller {
  kServerFlag,  // rsslab_server's --auto_trim* flags
  kPackage,     // rsslab.auto_trim()'s keyword arguments
};

struct AutoTrimKnob {
  const char* keyword;  // rsslab.auto_trim()'s keyword argument
  const char* flag;     // rsslab_server's flag without "--"; "" when it has none
  // The range, closed, in the keyword's unit (MiB, seconds, a fraction).
  double lo;
  double hi;
  // Flag units per keyword unit (settle: 1000 ms per s); 1 otherwise.
  double flag_scale = 1;
  // The flag takes whole numbers (the keyword takes any real number).
  bool flag_integer = true;
};

// gap_mb, settle_s, settle_fraction, interval_s, min_spacing_s, tick_s.
const std::vector<AutoTrimKnob>& AutoTrimKnobs();
// The knob of a keyword (or, below, a flag) in the table; aborts otherwise,
// a programming error every test that starts a server or the package catches.
const AutoTrimKnob& AutoTrimKnobByKeyword(absl::string_view keyword);
// nullptr for a flag the table does not have.
const AutoTrimKnob* FindAutoTrimFlag(absl::string_view flag);

// "--auto_trim_settle_ms" or "auto_trim(settle_s=)".
std::string AutoTrimKnobName(const AutoTrimKnob& knob, AutoTrimCaller caller);

// `value` (in the caller's unit: the flag's for kServerFlag, the keyword's
// for kPackage) is finite and within the knob's range; INVALID_ARGUMENT,
// one line naming the parameter as the caller spells it, otherwise.
absl::Status CheckAutoTrimValue(const AutoTrimKnob& knob, double value, AutoTrimCaller caller);

// A mode by name; INVALID_ARGUMENT naming `what` (the flag, "--auto_trim",
// or the keyword, "auto_trim(mode=)") and the modes otherwise.
absl::StatusOr<AutoTrimMode> ParseAutoTrimMode(absl::string_view s,
                                               absl::string_view what = "--auto_trim");
const char* AutoTrimModeName(AutoTrimMode mode);
// The mode names joined by `sep`: "off,after_burst,interval".
std::string AutoTrimModeNames(absl::string_view sep);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_AUTO_TRIM_TABLE_H_
