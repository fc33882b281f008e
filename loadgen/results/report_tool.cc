#include "loadgen/results/report_tool.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/shipped.h"

namespace rsslab {
namespace {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

}  // namespace

std::string FindReportTool() {
  if (const char* env = getenv("RSSLAB_REPORT_TOOL"); env != nullptr && *env) return env;
  return FindShipped("loadgen/results/plots_and_advice.py");
}

absl::Status RunReportTool(const std::string& tool, const std::string& run_dir,
                           std::string* output) {
  return RunReportToolArgs(tool, {run_dir}, output);
}

absl::Status RunReportToolArgs(const std::string& tool, const std::vector<std::string>& args,
                               std::string* output) {
  std::string quoted;
  for (const std::string& a : args) absl::StrAppend(&quoted, " ", Quote(a));
  const std::string later = absl::StrFormat(
      "plots skipped; install python3-matplotlib and run: /usr/bin/python3 %s%s",
      tool.empty() ? "loadgen/results/plots_and_advice.py" : tool, quoted);
  if (tool.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("loadgen/results/plots_and_advice.py not found next to the loadgen; ", later));
  }
  // Debian's interpreter first: python3-matplotlib is installed for it, and
  // a python3 earlier in PATH (pyenv, a venv) usually lacks it.
  std::string python = "python3";
  if (const char* env = getenv("RSSLAB_PYTHON"); env != nullptr && *env) {
    python = env;
  } else if (access("/usr/bin/python3", X_OK) == 0) {
    python = "/usr/bin/python3";
  }
  if (system(absl::StrCat(Quote(python), " -c 'import matplotlib' >/dev/null 2>&1").c_str()) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(python, " cannot import matplotlib; ", later));
  }
  const std::string cmd =
      absl::StrCat(Quote(python), " ", Quote(tool), quoted, " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError(absl::StrCat("cannot run ", cmd));
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof(chunk), p)) > 0) output->append(chunk, got);
  const int st = pclose(p);
  if (st != 0) {
    return absl::InternalError(absl::StrFormat("%s failed (status %d): %s", cmd,
                                               WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                                               *output));
  }
  return absl::OkStatus();
}

}  // namespace rsslab
