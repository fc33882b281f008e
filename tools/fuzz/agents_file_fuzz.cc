// libFuzzer target: the --agents_file / --agent list (loadgen/sweep/agents_list.h).
// Run via tools/fuzz.sh. Aborts if an accepted entry is not what the text
// held (the use-after-free of issue 27 dialled heap garbage).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "loadgen/sweep/agents_list.h"

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
  return 0;
}
