#include "common/deps_env.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace rsslab {
namespace {

bool IsKey(absl::string_view k) {
  if (k.empty() || absl::ascii_isdigit(k[0])) return false;
  for (char c : k) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

absl::StatusOr<std::map<std::string, std::string>> ReadDepsEnv(const std::string& path) {
  if (path.empty()) {
    return absl::NotFoundError(absl::StrCat(kMimalloc3EnvFile, " not found"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseDepsEnv(text.str(), path);
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseDepsEnv(absl::string_view text,
                                                                absl::string_view source) {
  std::map<std::string, std::string> out;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++n;
    absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || t[0] == '#') continue;
    const size_t eq = t.find('=');
    if (eq == absl::string_view::npos || !IsKey(t.substr(0, eq))) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", n, ": not KEY=VALUE: '", t, "'"));
    }
    if (!out.emplace(std::string(t.substr(0, eq)), std::string(t.substr(eq + 1))).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", n, ": ", t.substr(0, eq), " given twice"));
    }
  }
  return out;
}

absl::StatusOr<Mimalloc3Dep> ReadMimalloc3Dep(const std::string& path) {
  absl::StatusOr<std::map<std::string, std::string>> env = ReadDepsEnv(path);
  if (!env.ok()) return env.status();
  Mimalloc3Dep d;
  for (auto [key, field] : {std::pair<const char*, std::string*>{"MIMALLOC3_VERSION", &d.version},
                            {"MIMALLOC3_DIR", &d.dir},
                            {"MIMALLOC3_LIB", &d.lib}}) {
    auto it = env->find(key);
    if (it == env->end() || it->second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": no ", key));
    }
    *field = it->second;
  }
  if (!absl::StartsWith(d.lib, absl::StrCat(d.dir, "/"))) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": MIMALLOC3_LIB ", d.lib, " is not under MIMALLOC3_DIR ", d.dir));
  }
  return d;
}

absl::StatusOr<std::string> LookupDepsToken(const std::string& path, absl::string_view token) {
  if (!absl::StartsWith(token, "$") || !IsKey(token.substr(1))) {
    return absl::InvalidArgumentError(absl::StrCat("'", token, "' is not a $KEY token"));
  }
  absl::StatusOr<std::map<std::string, std::string>> env = ReadDepsEnv(path);
  if (!env.ok()) return env.status();
  auto it = env->find(std::string(token.substr(1)));
  if (it == env->end()) {
    return absl::InvalidArgumentError(absl::StrCat(token.substr(1), " is not set in ", path));
  }
  return it->second;
}

}  // namespace rsslab
