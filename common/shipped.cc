#include "common/shipped.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace rsslab {
namespace {

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

}  // namespace

std::string DefaultHandlerPath() {
  return absl::StrCat(kHandlersDir, "/", kDefaultHandlerName, ".py");
}

std::string FindShippedNear(absl::string_view exe, absl::string_view rel) {
  std::vector<std::string> candidates;
  if (const char* home = getenv("RSSLAB_HOME"); home != nullptr && *home) {
    candidates.push_back(absl::StrCat(home, "/", rel));
  }
  if (!exe.empty()) {
    const size_t slash = exe.find_last_of('/');
    const std::string dir(slash == absl::string_view::npos ? "." : exe.substr(0, slash));
    candidates.push_back(absl::StrCat(dir, "/../", rel));
    candidates.push_back(absl::StrCat(dir, "/../../../", rel));
    candidates.push_back(absl::StrCat(exe, ".runfiles/rsslab/", rel));
  }
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    // Only absolute: a relative runfiles dir means another process's cwd.
    if (const char* rf = getenv(env); rf != nullptr && *rf == '/') {
      candidates.push_back(absl::StrCat(rf, "/rsslab/", rel));
    }
  }
  candidates.push_back(std::string(rel));
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) != 0) continue;
    char real[PATH_MAX];
    return realpath(c.c_str(), real) ? std::string(real) : c;
  }
  return "";
}

std::string FindShipped(absl::string_view rel) { return FindShippedNear(SelfExe(), rel); }

}  // namespace rsslab
