// /proc/<pid>/environ: the environment a process started with, and the
// variables in it that change how memory is allocated.
//
// Example:
//
//   auto env = rsslab::procfs::ReadEnviron(pid);  // needs ptrace-read permission
//   auto alloc_env = rsslab::procfs::AllocatorEnv(*env);  // LD_PRELOAD, MALLOC_*, ...
#ifndef RSSLAB_COMMON_PROCFS_ENVIRON_H_
#define RSSLAB_COMMON_PROCFS_ENVIRON_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace procfs {

// Parses /proc/<pid>/environ (NUL-separated NAME=value): the environment the
// process was started with, not what it has setenv()ed since. If a name
// repeats, the first wins, as for getenv(3).
std::map<std::string, std::string> ParseEnviron(absl::string_view text);
absl::StatusOr<std::map<std::string, std::string>> ReadEnviron(int pid);

// Keeps the variables that change how memory is allocated: LD_PRELOAD,
// GLIBC_TUNABLES, MALLOC_* (MALLOC_ARENA_MAX, MALLOC_CONF, MALLOC_TRIM_
// THRESHOLD_, ...), JE_MALLOC_CONF, _RJEM_MALLOC_CONF, MIMALLOC_*,
// TCMALLOC_*, PYTHONMALLOC*.
std::map<std::string, std::string> AllocatorEnv(
    const std::map<std::string, std::string>& env);

// AllocatorEnv(ReadEnviron(pid)) without building the whole environment:
// only the kept variables are copied out of the (mmapped) text.
absl::StatusOr<std::map<std::string, std::string>> ReadAllocatorEnv(int pid);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_ENVIRON_H_
