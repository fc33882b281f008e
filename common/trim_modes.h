// Trim modes by name: the one table of them. rsslab_server and the Python
// package (C++ and rsslab.release()), rsslab_ctl, the load generator's
// scenarios and docs/SERVER.md name the modes of proto/control.proto's
// TrimMode through here (the package's Python list is checked against it).
// What each mode does is ControlOps' (control/ops/control_ops.h), the same
// in every host.
//
// Example:
//   std::optional<rsslab::v1::TrimMode> m = rsslab::ParseTrimModeName("purge");
//   if (!m) Fail(absl::StrCat("--mode must be ", rsslab::TrimModeNames()));
//   TrimModeName(rsslab::v1::TRIM_PER_THREAD);  // "per_thread"

#ifndef RSSLAB_COMMON_TRIM_MODES_H_
#define RSSLAB_COMMON_TRIM_MODES_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "proto/control.pb.h"

namespace rsslab {

struct TrimModeInfo {
  v1::TrimMode mode;
  const char* name;     // as rsslab_ctl --mode and rsslab.release(mode=) spell it
  const char* spoken;   // in the refusal of a number the proto does not name
  const char* meaning;  // one line, for usage texts and docs
};

inline constexpr TrimModeInfo kTrimModes[] = {
    {v1::TRIM_MODE_DEFAULT, "default", "default",
     "the global release, then each worker's own (on mimalloc, with the free-block purge where "
     "a look finds enough)"},
    {v1::TRIM_GLOBAL_ONLY, "global", "global only", "the global release only"},
    {v1::TRIM_PER_THREAD, "per_thread", "per thread", "each worker's own release only"},
    {v1::TRIM_FREE_BLOCK_PURGE, "purge", "free-block purge",
     "the default, and on mimalloc every worker walks its heap for the free-block purge"},
};

// "per_thread" for TRIM_PER_THREAD; "" for a number the proto does not name.
const char* TrimModeName(v1::TrimMode mode);

// A name from the table ("global_only" is also taken for "global", the
// enum's own word); nullopt otherwise.
std::optional<v1::TrimMode> ParseTrimModeName(absl::string_view name);

// "default, global, per_thread or purge".
std::string TrimModeNames();

// "default|global|per_thread|purge", for usage lines (rsslab_ctl's, and
// docs/SERVER.md's, which trim_modes_test holds against this).
std::string TrimModeAlternatives();

// "0 (default), 1 (global only), 2 (per thread) or 3 (free-block purge)".
std::string TrimModeChoices();

}  // namespace rsslab

#endif  // RSSLAB_COMMON_TRIM_MODES_H_
