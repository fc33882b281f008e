// The Fingerprint of a process (proto/snapshot.proto): what makes two runs
// comparable, read from the process and its machine.
//
//   rsslab::v1::Fingerprint fp;
//   rsslab::procfs::ReadFingerprint(/*pid=*/0, &fp);  // env, CPUs, cgroup, THP
//   fp.set_glibc_version(gnu_get_libc_version());      // inside: ask the library
//
//   // From outside (a program without the rsslab package):
//   rsslab::procfs::ReadOutsideFingerprint(pid, maps_text, &fp);
//
// Nothing here fails: a file that cannot be read leaves its field empty (0
// for counts), which compare treats as "not recorded".
#ifndef RSSLAB_COMMON_PROCFS_FINGERPRINT_H_
#define RSSLAB_COMMON_PROCFS_FINGERPRINT_H_

#include <string>

#include "absl/strings/string_view.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace procfs {

// start_env (/proc/PID/environ, allocator variables only), cpus_online,
// cpus_allowed (/proc/PID/status Cpus_allowed_list), cgroup_cpu_max and
// thp_enabled. pid 0 = this process.
void ReadFingerprint(int pid, rsslab::v1::Fingerprint* out);

// ReadFingerprint plus what an outside reader can learn from the maps:
// the allocator mapped, glibc's version from the mapped libc.so.6's banner,
// and the allocator's version from its library file name (libmimalloc.so.2.1
// -> "2.1"; empty when the name carries none).
void ReadOutsideFingerprint(int pid, absl::string_view maps_text, rsslab::v1::Fingerprint* out);

// Parsers, exposed for tests (CPU lists: procfs::CountCpuList).
// "always [madvise] never" -> "madvise"; "" when no mode is bracketed.
std::string SelectedMode(absl::string_view text);
// The version in glibc's banner ("... stable release version 2.36."), found
// in bytes of libc.so.6; "" if absent.
std::string GlibcBannerVersion(absl::string_view bytes);
// The tightest CPU limit on the path from the process's cgroup to the root,
// in cpu.max form, given /proc/PID/cgroup's text and where the cgroup
// filesystems are mounted (/sys/fs/cgroup). v2 ("0::/path") reads
// ROOT/path/cpu.max (or ROOT/unified/path in a hybrid layout); v1 reads
// ROOT/<controllers>/path/cpu.cfs_quota_us and cpu.cfs_period_us from the
// hierarchy whose controllers include "cpu". "max" when no level limits
// it; "" when neither hierarchy could be read.
std::string CgroupCpuMax(absl::string_view proc_cgroup_text, const std::string& cgroup_root);

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_FINGERPRINT_H_
