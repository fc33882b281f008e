// The libraries ./rsslab setup fetches into the project, as pinned in
// tools/setup/mimalloc3.env (KEY=VALUE lines, `#` comments, no quoting or
// expansion; the shell scripts source the same file).
//
// Usage:
//   absl::StatusOr<Mimalloc3Dep> m = ReadMimalloc3Dep(FindShipped(kMimalloc3EnvFile));
//   if (m.ok()) ... m->lib ...  // ".deps/mimalloc3/usr/lib/.../libmimalloc.so.3"
//   // A profile's preload "$MIMALLOC3_LIB" is resolved with LookupDepsToken.

#ifndef RSSLAB_COMMON_DEPS_ENV_H_
#define RSSLAB_COMMON_DEPS_ENV_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

// Relative to the source tree's top (found with FindShipped, or in runfiles).
inline constexpr absl::string_view kMimalloc3EnvFile = "tools/setup/mimalloc3.env";

// Every KEY=VALUE of `text`; an error names the line that is neither that,
// blank nor a comment, or a key given twice. `source` names the text.
absl::StatusOr<std::map<std::string, std::string>> ParseDepsEnv(absl::string_view text,
                                                                absl::string_view source);

struct Mimalloc3Dep {
  std::string version;  // MIMALLOC3_VERSION, "3.0.1+ds-2.1"
  std::string dir;      // MIMALLOC3_DIR, ".deps/mimalloc3"
  std::string lib;      // MIMALLOC3_LIB, under dir
};

// Reads and checks the file at `path` (MIMALLOC3_VERSION, _DIR and _LIB
// present, _LIB under _DIR/); "" is "not found".
absl::StatusOr<Mimalloc3Dep> ReadMimalloc3Dep(const std::string& path);

// The value of `$KEY` (token "$KEY") from the file at `path`.
absl::StatusOr<std::string> LookupDepsToken(const std::string& path, absl::string_view token);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_DEPS_ENV_H_
