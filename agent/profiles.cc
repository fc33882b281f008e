#include "agent/profiles.h"

#include "common/deps_env.h"
#include "common/files.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "common/procfs/procfs.h"
#include "common/shipped.h"

extern char** environ;

namespace rsslab {
namespace profiles {
namespace {

using rsslab::v1::Profile;
using rsslab::v1::ProfileSet;

const char* const kAllocators[] = {"glibc", "jemalloc", "mimalloc", "tcmalloc"};

bool KnownAllocator(absl::string_view a) {
  for (const char* k : kAllocators) {
    if (a == k) return true;
  }
  return false;
}

// Collects the parser's complaints with 1-based line numbers (the parser's
// are 0-based), so an error points at the line an editor shows.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  explicit Collector(absl::string_view source) : source_(source) {}
  void AddError(int line, int column, const std::string& message) override {
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, int column, const std::string& message) override {
    AddError(line, column, message);
  }
  std::string Joined() const { return absl::StrJoin(errors_, "\n"); }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

bool IsEnvName(absl::string_view n) {
  if (n.empty() || absl::ascii_isdigit(n[0])) return false;
  for (char c : n) {
    if (!absl::ascii_isalnum(c) && c != '_') return false;
  }
  return true;
}

std::string BaseName(absl::string_view path) {
  size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path : path.substr(slash + 1));
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

std::string GuessAllocator(absl::string_view preload) {
  std::string base = BaseName(preload);
  for (const char* a : {"jemalloc", "mimalloc", "tcmalloc"}) {
    if (absl::StartsWith(base, absl::StrCat("lib", a))) return a;
  }
  return "";
}

// A preload "$KEY" ("$MIMALLOC3_LIB"): KEY's value in
// tools/setup/mimalloc3.env, which must be under .deps/. The file not found
// leaves the profile unavailable (as a missing library does); other
// failures are errors.
void ResolvePreloadToken(const std::string& at, Profile* p, std::vector<std::string>* errors) {
  const std::string token = p->preload();
  const std::string env_file = FindShipped(kMimalloc3EnvFile);
  absl::StatusOr<std::string> value = LookupDepsToken(env_file, token);
  if (value.ok() && IsProjectLocal(*value)) {
    p->set_preload(*value);
  } else if (value.ok()) {
    errors->push_back(absl::StrCat(at, ": preload ", token, " is '", *value, "' in ", env_file,
                                   ", not under ", kProjectDepsDir, "/"));
  } else if (absl::IsNotFound(value.status())) {
    p->set_unavailable(absl::StrCat("preload ", token, ": ", value.status().message()));
  } else {
    errors->push_back(absl::StrCat(at, ": preload ", token, ": ", value.status().message()));
  }
}

}  // namespace

bool IsProjectLocal(absl::string_view preload) {
  if (!absl::StartsWith(preload, absl::StrCat(kProjectDepsDir, "/"))) return false;
  for (absl::string_view part : absl::StrSplit(preload, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
  }
  return true;
}

bool IsPlainName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (name[0] == '.' || name[0] == '-') return false;
  if (absl::StrContains(name, "..")) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

absl::StatusOr<ProfileSet> ParseProfiles(absl::string_view text, absl::string_view source,
                                         const ParseOptions& options) {
  ProfileSet set;
  google::protobuf::TextFormat::Parser parser;
  Collector collector(source);
  parser.RecordErrorsTo(&collector);
  google::protobuf::TextFormat::ParseInfoTree tree;
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &set)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse profiles: ", collector.Joined()));
  }
  const google::protobuf::FieldDescriptor* field =
      ProfileSet::descriptor()->FindFieldByName("profile");
  auto where = [&](int i) {
    google::protobuf::TextFormat::ParseLocation loc = tree.GetLocation(field, i);
    return absl::StrCat(source, ":", loc.line + 1);
  };
  std::vector<std::string> errors;
  std::map<std::string, int> seen;
  for (int i = 0; i < set.profile_size(); ++i) {
    Profile* p = set.mutable_profile(i);
    std::string at = absl::StrCat(where(i), ": profile '", p->name(), "'");
    if (!IsPlainName(p->name())) {
      errors.push_back(absl::StrCat(where(i), ": profile name '", p->name(),
                                    "' must be [A-Za-z0-9._-]+ (a name, not a path)"));
    }
    auto [it, inserted] = seen.emplace(p->name(), i);
    if (!inserted) {
      errors.push_back(absl::StrCat(at, ": duplicate name (first defined at ",
                                    where(it->second), ")"));
    }
    if (absl::StartsWith(p->preload(), "$")) ResolvePreloadToken(at, p, &errors);
    if (!p->unavailable().empty()) {
      // Left as written: it cannot launch here.
    } else if (!p->preload().empty() && p->preload()[0] != '/' && IsProjectLocal(p->preload())) {
      // A library ./rsslab setup fetched into the project (.deps/...): found
      // like the other shipped files, else the profile is unavailable here.
      const std::string rel = p->preload();
      std::string found = options.check_files ? FindShipped(rel) : std::string();
      if (!found.empty()) {
        p->set_preload(found);
      } else if (options.check_files) {
        p->set_unavailable(absl::StrCat(rel, " is not in this project (./rsslab setup fetches it)"));
      }
    } else if (!p->preload().empty()) {
      struct stat st;
      if (p->preload()[0] != '/') {
        errors.push_back(absl::StrCat(at, ": preload '", p->preload(),
                                      "' must be an absolute path or under ", kProjectDepsDir, "/"));
      } else if (options.check_files && stat(p->preload().c_str(), &st) != 0) {
        errors.push_back(absl::StrCat(at, ": preload library ", p->preload(),
                                      " does not exist"));
      } else if (options.check_files && !S_ISREG(st.st_mode)) {
        errors.push_back(absl::StrCat(at, ": preload ", p->preload(), " is not a file"));
      }
    }
    for (const auto& e : p->env()) {
      if (!IsEnvName(e.name())) {
        errors.push_back(absl::StrCat(at, ": env name '", e.name(), "' is not an identifier"));
      } else if (e.name() == "LD_PRELOAD") {
        errors.push_back(absl::StrCat(at, ": set LD_PRELOAD with 'preload', not env"));
      }
      if (e.value().find('\0') != std::string::npos) {
        errors.push_back(absl::StrCat(at, ": env ", e.name(), " contains a NUL"));
      }
    }
    if (p->allocator().empty()) {
      p->set_allocator(p->preload().empty() ? "glibc" : GuessAllocator(p->preload()));
    }
    if (!KnownAllocator(p->allocator())) {
      errors.push_back(absl::StrCat(at, ": allocator '", p->allocator(),
                                    "' must be one of glibc, jemalloc, mimalloc, tcmalloc"));
    } else if (p->preload().empty() && p->allocator() != "glibc") {
      errors.push_back(absl::StrCat(at, ": allocator ", p->allocator(),
                                    " needs a preload library"));
    }
  }
  if (!errors.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
  }
  return set;
}

absl::StatusOr<ProfileSet> LoadProfiles(absl::string_view paths, const ParseOptions& options) {
  ProfileSet all;
  std::map<std::string, std::string> origin;
  for (absl::string_view path : absl::StrSplit(paths, ',', absl::SkipEmpty())) {
    absl::StatusOr<std::string> text =
        ReadFileBounded(std::string(path), kProfilesFileMaxBytes, "profiles file");
    if (!text.ok()) return text.status();
    absl::StatusOr<ProfileSet> one = ParseProfiles(*text, path, options);
    if (!one.ok()) return one.status();
    for (const Profile& p : one->profile()) {
      auto [it, inserted] = origin.emplace(p.name(), std::string(path));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("profile '", p.name(), "' in ", path,
                                                       " is already defined in ", it->second));
      }
      *all.add_profile() = p;
    }
  }
  if (all.profile_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("no profiles in '", paths, "'"));
  }
  return all;
}

const Profile* FindProfile(const ProfileSet& set, absl::string_view name) {
  for (const Profile& p : set.profile()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

std::string ProfileNames(const ProfileSet& set) {
  std::vector<std::string> names;
  for (const Profile& p : set.profile()) names.push_back(p.name());
  return absl::StrJoin(names, ", ");
}

Env CurrentEnviron() {
  Env env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

Env BuildLaunchEnv(const Profile& profile, const Env& base) {
  Env env = base;
  for (const auto& kv : procfs::AllocatorEnv(base)) env.erase(kv.first);
  env.erase("LD_PRELOAD");  // in case AllocatorEnv ever stops listing it
  for (const auto& e : profile.env()) env[e.name()] = e.value();
  if (!profile.preload().empty()) env["LD_PRELOAD"] = profile.preload();
  return env;
}

std::vector<std::string> EnvStrings(const Env& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& kv : env) out.push_back(absl::StrCat(kv.first, "=", kv.second));
  return out;
}

absl::StatusOr<Verification> VerifyProfile(int pid, const Profile& profile) {
  std::vector<std::string> missing;
  Verification v;
  const std::string maps_name = absl::StrCat("/proc/", pid, "/maps");
  const std::string environ_name = absl::StrCat("/proc/", pid, "/environ");
  absl::StatusOr<std::string> maps = procfs::ReadProcFile(pid, "maps");
  if (!maps.ok()) {
    missing.push_back(absl::StrCat("cannot read ", maps_name, ": ", maps.status().message()));
  } else {
    procfs::MappedAllocator a = procfs::DetectAllocator(*maps);
    v.allocator = a.name;
    v.mapped_library = a.library;
    if (!profile.preload().empty()) {
      const std::string real = RealPath(profile.preload());
      if (!procfs::IsMapped(*maps, real)) {
        missing.push_back(absl::StrCat(profile.preload(),
                                       real != profile.preload() ? absl::StrCat(" (", real, ")") : "",
                                       " is not mapped in ", maps_name));
      } else {
        v.mapped_library = real;
      }
    }
    if (!profile.expect_mapped().empty() && !procfs::IsMapped(*maps, profile.expect_mapped())) {
      missing.push_back(absl::StrCat("nothing matching '", profile.expect_mapped(),
                                     "' is mapped in ", maps_name));
    }
    if (!profile.allocator().empty() && a.name != profile.allocator()) {
      missing.push_back(absl::StrCat("allocator in ", maps_name, " is ", a.name,
                                     a.library.empty() ? "" : absl::StrCat(" (", a.library, ")"),
                                     ", want ", profile.allocator()));
    }
  }
  absl::StatusOr<Env> env = procfs::ReadEnviron(pid);
  if (!env.ok()) {
    missing.push_back(absl::StrCat("cannot read ", environ_name, ": ", env.status().message()));
  } else {
    auto check = [&](const std::string& name, const std::string& want, bool contains) {
      auto it = env->find(name);
      if (it == env->end()) {
        missing.push_back(absl::StrCat(name, " is not in ", environ_name, " (want ", want, ")"));
      } else if (contains ? !absl::StrContains(it->second, want) : it->second != want) {
        missing.push_back(absl::StrCat(name, "=", it->second, " in ", environ_name, ", want ",
                                       contains ? "it to contain " : "", want));
      } else if (!contains) {
        v.env.emplace_back(name, it->second);
      }
    };
    for (const auto& e : profile.env()) check(e.name(), e.value(), /*contains=*/false);
    if (!profile.preload().empty()) check("LD_PRELOAD", profile.preload(), /*contains=*/true);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("profile '", profile.name(), "' did not take effect in pid ", pid, ": ",
                     absl::StrJoin(missing, "; ")));
  }
  return v;
}

absl::Status CheckReportedAllocator(const Profile& profile, absl::string_view reported) {
  if (profile.allocator().empty() || reported == profile.allocator()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("profile '", profile.name(), "': the server's snapshot reports allocator '",
                   reported, "', want '", profile.allocator(), "'"));
}

absl::StatusOr<std::string> ProfileFileFlag(const std::string& profile_file,
                                            const std::string& old_profiles,
                                            std::string* deprecated_note) {
  deprecated_note->clear();
  if (old_profiles.empty()) return profile_file;
  if (!profile_file.empty() && profile_file != old_profiles) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--profile_file=", profile_file, " and --profiles=", old_profiles,
        " name different files: give --profile_file only"));
  }
  *deprecated_note = absl::StrCat("--profiles=", old_profiles,
                                  " is deprecated: use --profile_file=", old_profiles,
                                  " (the loadgen's --profiles is a list of profile names)");
  return old_profiles;
}

}  // namespace profiles
}  // namespace rsslab
