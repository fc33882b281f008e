#include "common/host_info.h"

#include <dirent.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace rsslab {
namespace {

constexpr int kMaxCpu = 1024;

// The value of the first "key: value" line of a /proc file.
std::string ProcField(const char* path, absl::string_view key) {
  std::ifstream in(path);
  std::string line;
  // Bounded: /proc/cpuinfo of a large machine is long, the field is early.
  for (int n = 0; n < 4096 && std::getline(in, line); ++n) {
    absl::string_view l(line);
    if (!absl::ConsumePrefix(&l, key)) continue;
    l = absl::StripLeadingAsciiWhitespace(l);
    if (!absl::ConsumePrefix(&l, ":")) continue;
    return std::string(absl::StripAsciiWhitespace(l));
  }
  return "";
}

}  // namespace

HostFacts CurrentHost() {
  HostFacts h;
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  h.hostname = name;
  utsname u;
  if (uname(&u) == 0) h.kernel = u.release;
  h.cpu_model = ProcField("/proc/cpuinfo", "model name");
  h.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  h.mem_total_bytes = MemTotalBytes();
  return h;
}

int64_t MemTotalBytes() {
  std::string mem = ProcField("/proc/meminfo", "MemTotal");  // "16384 kB"
  int64_t kb = 0;
  if (!absl::SimpleAtoi(absl::StripSuffix(mem, " kB"), &kb) || kb <= 0) return 0;
  return kb * 1024;
}

absl::StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  if (text.size() > 1024) return absl::InvalidArgumentError("CPU list longer than 1024 characters");
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int lo = 0, hi = 0;
    if (!absl::SimpleAtoi(ends[0], &lo) || lo < 0 || lo >= kMaxCpu ||
        (ends.size() == 2 && (!absl::SimpleAtoi(ends[1], &hi) || hi < lo || hi >= kMaxCpu))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"%s\" in the CPU list \"%s\" is not a CPU (0..%d) or a range like 2-3", part, text,
          kMaxCpu - 1));
    }
    if (ends.size() == 1) hi = lo;
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(cpus[i]) : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE && c < kMaxCpu; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back(c);
  }
  return out;
}

absl::Status PinProcess(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  // sched_setaffinity acts on one thread: every thread that exists now
  // (gRPC's among them), then new ones inherit from their creator.
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return absl::InternalError("cannot list /proc/self/task");
  absl::Status status;
  while (dirent* e = readdir(d)) {
    int tid = 0;
    if (!absl::SimpleAtoi(e->d_name, &tid)) continue;
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH) {
      status = absl::InvalidArgumentError(absl::StrFormat(
          "cannot pin the loadgen to CPUs %s: %s", FormatCpuList(cpus), strerror(errno)));
    }
  }
  closedir(d);
  return status;
}

absl::StatusOr<CpuSplit> ChooseCpus(const std::string& server_flag,
                                    const std::string& loadgen_flag,
                                    const std::vector<int>& allowed) {
  CpuSplit split;
  if (server_flag.empty() != loadgen_flag.empty()) {
    return absl::InvalidArgumentError(
        "--server_cpus and --loadgen_cpus go together: give both (disjoint CPU lists) or "
        "neither (the allowed CPUs are split in two)");
  }
  if (server_flag.empty()) {
    if (allowed.size() < 2) return split;  // one CPU: nothing to split
    const size_t half = allowed.size() / 2;
    split.server.assign(allowed.begin(), allowed.begin() + half);
    split.loadgen.assign(allowed.begin() + half, allowed.end());
    return split;
  }
  for (auto [flag, text, out] : {std::make_tuple("--server_cpus", &server_flag, &split.server),
                                 std::make_tuple("--loadgen_cpus", &loadgen_flag, &split.loadgen)}) {
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(*text);
    if (!cpus.ok()) return absl::InvalidArgumentError(absl::StrCat(flag, ": ", cpus.status().message()));
    for (int c : *cpus) {
      if (std::find(allowed.begin(), allowed.end(), c) == allowed.end()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s=%s: CPU %d is not one this process may use (allowed: %s)", flag, *text, c,
            FormatCpuList(allowed)));
      }
    }
    *out = *std::move(cpus);
  }
  for (int c : split.server) {
    if (std::find(split.loadgen.begin(), split.loadgen.end(), c) != split.loadgen.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--server_cpus=%s and --loadgen_cpus=%s share CPU %d: they must be disjoint, or the "
          "loadgen's work shows up in the server's figures",
          server_flag, loadgen_flag, c));
    }
  }
  return split;
}

}  // namespace rsslab
