// Allocator profiles: loading and validating the profiles file, building a
// server's launch environment from a profile, and verifying in /proc that the
// profile actually took effect in a running process.
//
// Example:
//
//   absl::StatusOr<rsslab::v1::ProfileSet> set =
//       rsslab::profiles::LoadProfiles("agent/profiles.textproto");
//   const rsslab::v1::Profile* p = rsslab::profiles::FindProfile(*set, "jemalloc-bg");
//   rsslab::profiles::Env env =
//       rsslab::profiles::BuildLaunchEnv(*p, rsslab::profiles::CurrentEnviron());
//   // ... fork/exec the server with `env` ...
//   absl::StatusOr<rsslab::profiles::Verification> v =
//       rsslab::profiles::VerifyProfile(pid, *p);
//   // !v.ok(): "profile 'jemalloc-bg' did not take effect in pid 123:
//   //           MALLOC_CONF is not in /proc/123/environ (want background_thread:true)"
//
// Why verify at all: a wrong LD_PRELOAD path makes ld.so print a warning and
// carry on with glibc (seed 004), and MALLOC_ARENA_MAX set after start is
// silently ignored (seed 002). Both produce plausible numbers for the wrong
// setup; only reading /proc/PID/maps and /proc/PID/environ proves it.
#ifndef RSSLAB_AGENT_PROFILES_H_
#define RSSLAB_AGENT_PROFILES_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/profile.pb.h"

namespace rsslab {
namespace profiles {

using Env = std::map<std::string, std::string>;

struct ParseOptions {
  // Check that every preload file exists (stat). Off only for tests that
  // want to launch a deliberately broken profile.
  bool check_files = true;
};

// Where ./rsslab setup puts libraries it fetches into the project
// (tools/mimalloc3.sh): a preload "relative to the project" starts here.
inline constexpr absl::string_view kProjectDepsDir = ".deps";

// True for ".deps/a/b" (no empty, "." or ".." parts).
bool IsProjectLocal(absl::string_view preload);

// Parses and validates profile text. `source` names the text in errors
// ("agent/profiles.textproto:12:3: ..."). Validation: names are
// [A-Za-z0-9._-]+ (never a path) and unique; preload is empty, an absolute
// path to an existing file, a token "$KEY" replaced by KEY's value in
// tools/setup/mimalloc3.env (kMimalloc3EnvFile; it must be under .deps/, and
// the file not found leaves the profile `unavailable`), or a project-local path under .deps/ (found with
// FindShipped and replaced by its real path; when it is not there the
// profile loads with `unavailable` saying so, and cannot launch); env names are identifiers and never LD_PRELOAD;
// allocator is glibc|jemalloc|mimalloc|tcmalloc (defaults: glibc without a
// preload, else guessed from the preload's file name).
absl::StatusOr<rsslab::v1::ProfileSet> ParseProfiles(absl::string_view text,
                                                     absl::string_view source,
                                                     const ParseOptions& options = {});

// Loads one file, or several separated by commas (the shipped file plus a
// user's own); names must be unique across all of them.
absl::StatusOr<rsslab::v1::ProfileSet> LoadProfiles(absl::string_view paths,
                                                    const ParseOptions& options = {});

// The profiles file(s) from a program's --profile_file and its old
// spelling --profiles (kept working: the loadgen's --profiles is a list of
// profile names, the same word for another thing). DEPRECATED_NOTE gets a
// line for stderr when only the old spelling was given; both given and
// different is an error naming both. "" when neither was given.
absl::StatusOr<std::string> ProfileFileFlag(const std::string& profile_file,
                                            const std::string& old_profiles,
                                            std::string* deprecated_note);

// nullptr if there is no such profile.
const rsslab::v1::Profile* FindProfile(const rsslab::v1::ProfileSet& set,
                                       absl::string_view name);

// "glibc, glibc-arena2, ..." for error messages.
std::string ProfileNames(const rsslab::v1::ProfileSet& set);

// True for a plain name: [A-Za-z0-9._-]+, no "..", not starting with '.' or
// '-'. Used for every name that arrives over RPC (profile, handler).
bool IsPlainName(absl::string_view name);

// The environment of this process.
Env CurrentEnviron();

// `base` without allocator-related variables (LD_PRELOAD, MALLOC_*,
// MIMALLOC_*, TCMALLOC_*, PYTHONMALLOC*, GLIBC_TUNABLES, ...: whatever
// procfs::AllocatorEnv keeps), plus the profile's env and LD_PRELOAD. An
// inherited MALLOC_ARENA_MAX would otherwise turn "glibc" into something else
// without anybody noticing.
Env BuildLaunchEnv(const rsslab::v1::Profile& profile, const Env& base);

// NAME=value strings for execve.
std::vector<std::string> EnvStrings(const Env& env);

// What VerifyProfile saw.
struct Verification {
  std::string allocator;       // detected from /proc/PID/maps
  std::string mapped_library;  // path as mapped ("" for glibc without libc)
  std::vector<std::pair<std::string, std::string>> env;  // the profile's vars, as seen
};

// Checks /proc/PID/maps and /proc/PID/environ against the profile:
//  - the preload's realpath is mapped (the kernel shows the symlink target,
//    e.g. libmimalloc.so.2.0 for libmimalloc.so.2), and expect_mapped too;
//  - the allocator detected in maps is the profile's allocator (a glibc
//    profile must not have jemalloc & co. mapped);
//  - every env variable is in environ with exactly the profile's value, and
//    LD_PRELOAD names the preload.
// FAILED_PRECONDITION listing everything missing otherwise.
absl::StatusOr<Verification> VerifyProfile(int pid, const rsslab::v1::Profile& profile);

// Compares the allocator the server's own snapshot reports with the profile.
absl::Status CheckReportedAllocator(const rsslab::v1::Profile& profile,
                                    absl::string_view reported);

}  // namespace profiles
}  // namespace rsslab

#endif  // RSSLAB_AGENT_PROFILES_H_
