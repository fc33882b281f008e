// The machine a process runs on (what a sweep cell records as where it ran:
// the loadgen for --local cells, the agent for its servers), and CPU lists
// for pinning a server and a loadgen to disjoint CPUs.
//
//   rsslab::HostFacts where = rsslab::CurrentHost();          // uname, cpuinfo, meminfo
//   absl::StatusOr<std::vector<int>> cpus = rsslab::ParseCpuList("0-1,3");
//   rsslab::PinProcess(*cpus);     // every thread of this process, and those it makes later
#ifndef RSSLAB_COMMON_HOST_INFO_H_
#define RSSLAB_COMMON_HOST_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rsslab {

struct HostFacts {
  std::string hostname;
  std::string kernel;     // uname -r
  std::string cpu_model;  // /proc/cpuinfo "model name"
  int cpus = 0;           // online
  int64_t mem_total_bytes = 0;
};
// Host name, kernel release, CPU model, online CPUs and total memory of
// this machine.
HostFacts CurrentHost();

// MemTotal of /proc/meminfo in bytes; 0 when it cannot be read.
int64_t MemTotalBytes();

// "0-1,3" -> {0, 1, 3}, sorted, no duplicates; CPUs 0..1023.
// INVALID_ARGUMENT naming the bad part.
absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text);
// {0, 1, 3} -> "0-1,3".
std::string FormatCpuList(const std::vector<int>& cpus);

// The CPUs this process may run on (sched_getaffinity): what a batch
// system or a container gave it.
std::vector<int> AllowedCpus();

// Pins every thread of this process to `cpus` (threads made later inherit
// it). An error names the CPU the kernel refused.
absl::Status PinProcess(const std::vector<int>& cpus);

// --server_cpus / --loadgen_cpus for a --local cell: both given, both
// within the allowed CPUs and disjoint; or both empty, and then the allowed
// CPUs split in two halves (server first) when there are at least two.
// INVALID_ARGUMENT naming the problem.
struct CpuSplit {
  std::vector<int> server;
  std::vector<int> loadgen;
};
absl::StatusOr<CpuSplit> ChooseCpus(const std::string& server_flag,
                                    const std::string& loadgen_flag,
                                    const std::vector<int>& allowed);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_HOST_INFO_H_
