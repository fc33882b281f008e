// libFuzzer target: the --agents_file / --agent list (loadgen/sweep/agents_list.h),
// both as text (ParseAgentList) and as the file the loadgen reads
// (ReadAgentsFile: the bounded reader, then the same parse). Run via
// tools/fuzz.sh. Aborts if an accepted entry is not what the text held (a
// use-after-free once dialled heap garbage), if the file path and the
// text disagree, or if a file over the limit is accepted.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/files.h"
#include "loadgen/sweep/agents_list.h"

namespace {

// The input as a file: written in place each time (the fuzzer's work
// directory), read back by the real flag's path.
const std::string& InputFile() {
  static const std::string* path =
      new std::string("agents_file_fuzz.input." + std::to_string(getpid()));
  return *path;
}

bool WriteInput(const uint8_t* data, size_t size) {
  const int fd = open(InputFile().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const bool ok = write(fd, data, size) == static_cast<ssize_t>(size);
  close(fd);
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  for (char sep : {'\n', ','}) {
    absl::StatusOr<std::vector<std::string>> a = rsslab::ParseAgentList(text, sep, "fuzz");
    if (!a.ok()) {
      if (a.status().message().size() > 1024) abort();  // errors are one capped line
      continue;
    }
    for (const std::string& e : *a) {
      if (e.empty() || e.size() > rsslab::kMaxAgentChars) abort();
      if (text.find(e) == absl::string_view::npos) abort();
    }
  }
  if (!WriteInput(data, size)) return 0;
  absl::StatusOr<std::vector<std::string>> file = rsslab::ReadAgentsFile(InputFile());
  if (!file.ok()) {
    if (file.status().message().size() > 1024) abort();
    return 0;
  }
  if (static_cast<int64_t>(size) > rsslab::kAgentsFileMaxBytes || file->empty()) abort();
  absl::StatusOr<std::vector<std::string>> lines = rsslab::ParseAgentList(text, '\n', "fuzz");
  if (!lines.ok() || *lines != *file) abort();
  return 0;
}
