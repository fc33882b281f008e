#include "agent/exit_text.h"

#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rsslab {
namespace launch {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return absl::StrCat("killed by ",
                        abbrev ? absl::StrCat("SIG", abbrev) : absl::StrCat("signal ", WTERMSIG(status)),
                        WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return absl::StrCat("wait status ", status);
}

std::string LogTail(const std::string& path, int max_lines) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  off_t size = lseek(fd, 0, SEEK_END);
  off_t start = size > 8192 ? size - 8192 : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  ssize_t n = pread(fd, text.data(), text.size(), start);
  close(fd);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // a partial line
  size_t from = lines.size() > static_cast<size_t>(max_lines) ? lines.size() - max_lines : 0;
  return absl::StrJoin(lines.begin() + from, lines.end(), "\n");
}

}  // namespace launch
}  // namespace rsslab
