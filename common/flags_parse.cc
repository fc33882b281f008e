#include "common/flags_parse.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "absl/flags/parse.h"

namespace rsslab {
namespace {

std::atomic<bool> g_parsing{false};

// The library reports a bad value on stderr and calls exit(1); an atexit
// handler may end the process with another status, and _exit() may be
// called from one.
void ExitUsage() {
  if (g_parsing.load()) _exit(2);
}

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) break;
    while (*a == '-') ++a;
    if (strncmp(a, "help", 4) == 0 || strcmp(a, "version") == 0 ||
        strncmp(a, "only_check_args", 15) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::vector<char*> ParseFlags(int argc, char** argv) {
  if (AsksForHelp(argc, argv)) return absl::ParseCommandLine(argc, argv);
  static const bool registered = [] { return std::atexit(ExitUsage) == 0; }();
  (void)registered;
  g_parsing.store(true);
  std::vector<char*> out = absl::ParseCommandLine(argc, argv);
  g_parsing.store(false);
  return out;
}

std::vector<std::string> RepeatedFlagValues(int argc, char** argv, absl::string_view name) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') continue;
    a.remove_prefix(a[1] == '-' ? 2 : 1);
    if (a.substr(0, name.size()) != name) continue;
    a.remove_prefix(name.size());
    if (!a.empty() && a[0] == '=') {
      out.emplace_back(a.substr(1));
    } else if (a.empty() && i + 1 < argc) {
      out.emplace_back(argv[++i]);
    }
  }
  return out;
}

}  // namespace rsslab
