// Finding the files rsslab ships in its source tree (the default handler,
// the handler directory, the profiles, the report tool) from wherever a
// binary runs: bin/ next to the tree, Bazel's output tree, runfiles, or the
// directory named by $RSSLAB_HOME.
//
// Usage:
//   std::string h = rsslab::FindShipped(rsslab::DefaultHandlerPath());
//   if (h.empty()) Die("cannot find ...; pass --handler=PATH or set RSSLAB_HOME");
//   std::string dir = rsslab::FindShippedNear(server_binary, rsslab::kHandlersDir);

#ifndef RSSLAB_COMMON_SHIPPED_H_
#define RSSLAB_COMMON_SHIPPED_H_

#include <string>

#include "absl/strings/string_view.h"

namespace rsslab {

// The handler a server runs when none is named, and where handlers live.
inline constexpr absl::string_view kDefaultHandlerName = "web_worker";
inline constexpr absl::string_view kHandlersDir = "server/handlers";
// "server/handlers/web_worker.py".
std::string DefaultHandlerPath();

// `rel` (a path relative to the source tree's top) located for the running
// binary; the real path of the first readable candidate, or "" if none:
// $RSSLAB_HOME/rel, EXE_DIR/../rel (bin/), EXE_DIR/../../../rel (Bazel's
// bin/PKG/), EXE.runfiles/rsslab/rel, $RUNFILES_DIR/rsslab/rel,
// $TEST_SRCDIR/rsslab/rel, ./rel.
std::string FindShipped(absl::string_view rel);

// The same candidates around another binary (`exe` is its path), for
// example the server binary an agent launches.
std::string FindShippedNear(absl::string_view exe, absl::string_view rel);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_SHIPPED_H_
