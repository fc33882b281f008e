#include "common/procfs/environ.h"

#include "absl/strings/match.h"
#include "common/procfs/proc_file.h"

namespace rsslab {
namespace procfs {

namespace {

// Calls fn(key, value) for each NAME=value entry of environ text.
template <typename Fn>
void ForEachEnvEntry(absl::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nul = text.find('\0');
    absl::string_view entry = text.substr(0, nul);
    text.remove_prefix(nul == absl::string_view::npos ? text.size() : nul + 1);
    size_t eq = entry.find('=');
    if (entry.empty() || eq == 0) continue;
    absl::string_view key = entry.substr(0, eq);
    absl::string_view value =
        eq == absl::string_view::npos ? absl::string_view() : entry.substr(eq + 1);
    fn(key, value);
  }
}

bool IsAllocatorVariable(absl::string_view key) {
  static constexpr const char* kExact[] = {"LD_PRELOAD", "GLIBC_TUNABLES",
                                           "JE_MALLOC_CONF", "_RJEM_MALLOC_CONF"};
  static constexpr const char* kPrefixes[] = {"MALLOC_", "MIMALLOC_", "TCMALLOC_",
                                              "PYTHONMALLOC"};
  for (const char* e : kExact) {
    if (key == e) return true;
  }
  for (const char* p : kPrefixes) {
    if (absl::StartsWith(key, p)) return true;
  }
  return false;
}

}  // namespace

std::map<std::string, std::string> ParseEnviron(absl::string_view text) {
  std::map<std::string, std::string> env;
  ForEachEnvEntry(text, [&](absl::string_view key, absl::string_view value) {
    env.emplace(std::string(key), std::string(value));  // first one wins
  });
  return env;
}

absl::StatusOr<std::map<std::string, std::string>> ReadEnviron(int pid) {
  absl::StatusOr<std::string> text = ReadProcFile(pid, "environ");
  if (!text.ok()) return text.status();
  return ParseEnviron(*text);
}

std::map<std::string, std::string> AllocatorEnv(
    const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> kept;
  for (const auto& [key, value] : env) {
    if (IsAllocatorVariable(key)) kept.emplace(key, value);
  }
  return kept;
}

absl::StatusOr<std::map<std::string, std::string>> ReadAllocatorEnv(int pid) {
  absl::StatusOr<MappedText> text = MappedText::Read(pid, "environ");
  if (!text.ok()) return text.status();
  std::map<std::string, std::string> kept;
  ForEachEnvEntry(text->view(), [&](absl::string_view key, absl::string_view value) {
    if (IsAllocatorVariable(key)) kept.emplace(std::string(key), std::string(value));
  });
  return kept;
}

}  // namespace procfs
}  // namespace rsslab
