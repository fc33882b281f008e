#include "common/procfs/service_memory.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace procfs {
namespace {

// Field 4 of /proc/PID/stat (after the parenthesized comm, which may hold
// spaces and parentheses); 0 if unreadable.
int ParentOf(int pid) {
  absl::StatusOr<std::string> stat = ReadProcFile(pid, "stat");
  if (!stat.ok()) return 0;
  const size_t close = stat->rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(*stat).substr(close + 1), ' ', absl::SkipEmpty());
  int ppid = 0;
  return f.size() >= 2 && absl::SimpleAtoi(f[1], &ppid) ? ppid : 0;
}

std::string Exe(int pid) {
  char buf[4096];
  const std::string path = absl::StrCat("/proc/", pid, "/exe");
  const ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : "";
}

absl::StatusOr<rsslab::v1::ServiceProcess> ReadOne(int pid, const char* role) {
  rsslab::v1::ProcStatus st;
  if (absl::Status s = ReadStatus(pid, &st); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the service's ", role, " pid ", pid, " is gone: ", s.message()));
  }
  rsslab::v1::ServiceProcess p;
  p.set_pid(pid);
  p.set_role(role);
  p.set_rss_bytes(st.rss_bytes());
  p.set_anon_bytes(st.anon_bytes());
  p.set_hwm_bytes(st.hwm_bytes());
  p.set_threads(st.threads());
  absl::StatusOr<std::string> rollup = ReadProcFile(pid, "smaps_rollup");
  p.set_pss_bytes(rollup.ok() ? ParsePss(*rollup) : -1);
  return p;
}

}  // namespace

std::vector<int> ChildrenOf(int pid) {
  std::vector<int> out;
  absl::StatusOr<std::string> tasks = ReadProcFile(pid, "task/" + std::to_string(pid) + "/children");
  // Children of the main thread; a pre-fork master forks from it.
  if (!tasks.ok()) return out;
  for (absl::string_view w : absl::StrSplit(*tasks, ' ', absl::SkipWhitespace())) {
    int c = 0;
    if (absl::SimpleAtoi(w, &c)) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool DescendsFrom(int pid, int ancestor) {
  for (int i = 0; i < 64 && pid > 1; ++i) {
    if (pid == ancestor) return true;
    pid = ParentOf(pid);
  }
  return pid == ancestor;
}

absl::Status SameAllocatorSetup(int pid, const std::string& library,
                                const std::map<std::string, std::string>& env) {
  absl::StatusOr<std::string> maps = ReadProcFile(pid, "maps");
  if (!maps.ok()) return maps.status();
  if (!library.empty() && !IsMapped(*maps, library)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker pid ", pid, " does not have the profile's allocator ", library, " mapped"));
  }
  absl::StatusOr<std::map<std::string, std::string>> got = ReadAllocatorEnv(pid);
  if (!got.ok()) return got.status();
  for (const auto& [name, value] : env) {
    auto it = got->find(name);
    if (it == got->end() || it->second != value) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker pid ", pid, " started with ", name, "=",
          it == got->end() ? "(unset)" : it->second, ", not the profile's ", value));
    }
  }
  return absl::OkStatus();
}

int FindMaster(const std::vector<int>& worker_pids) {
  if (worker_pids.empty()) return 0;
  const int parent = ParentOf(worker_pids[0]);
  if (parent <= 1) return 0;
  for (int pid : worker_pids) {
    if (ParentOf(pid) != parent) return 0;
  }
  const std::string exe = Exe(parent);
  return !exe.empty() && exe == Exe(worker_pids[0]) ? parent : 0;
}

int64_t ParsePss(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, "Pss:")) continue;
    absl::string_view v = absl::StripAsciiWhitespace(line.substr(4));
    if (absl::EndsWith(v, "kB")) v = absl::StripAsciiWhitespace(v.substr(0, v.size() - 2));
    int64_t kb = 0;
    return absl::SimpleAtoi(v, &kb) ? kb * 1024 : -1;
  }
  return -1;
}

absl::StatusOr<rsslab::v1::ServiceMemory> ReadServiceMemory(int master_pid,
                                                           std::vector<int> worker_pids) {
  std::sort(worker_pids.begin(), worker_pids.end());
  rsslab::v1::ServiceMemory m;
  m.set_master_pid(master_pid);
  auto add = [&m](absl::StatusOr<rsslab::v1::ServiceProcess> p) -> absl::Status {
    if (!p.ok()) return p.status();
    m.set_rss_bytes(m.rss_bytes() + p->rss_bytes());
    m.set_anon_bytes(m.anon_bytes() + p->anon_bytes());
    m.set_pss_bytes(m.pss_bytes() < 0 || p->pss_bytes() < 0 ? -1
                                                             : m.pss_bytes() + p->pss_bytes());
    *m.add_processes() = *std::move(p);
    return absl::OkStatus();
  };
  if (master_pid != 0) {
    if (absl::Status s = add(ReadOne(master_pid, "master")); !s.ok()) return s;
  }
  for (int pid : worker_pids) {
    if (absl::Status s = add(ReadOne(pid, "worker")); !s.ok()) return s;
  }
  return m;
}

rsslab::v1::Snapshot ServiceSnapshot(const rsslab::v1::ServiceMemory& memory,
                                     const std::vector<rsslab::v1::Snapshot>& workers) {
  rsslab::v1::Snapshot s = workers.empty() ? rsslab::v1::Snapshot() : workers[0];
  rsslab::v1::ProcStatus* st = s.mutable_status();
  st->Clear();
  int64_t hwm = 0;
  int threads = 0;
  for (const auto& p : memory.processes()) {
    hwm += p.hwm_bytes();
    threads += p.threads();
  }
  st->set_rss_bytes(memory.rss_bytes());
  st->set_anon_bytes(memory.anon_bytes());
  st->set_hwm_bytes(hwm);
  st->set_threads(threads);
  int arenas = 0;
  for (const auto& w : workers) arenas += w.memory_map().arena_count();
  s.mutable_memory_map()->set_arena_count(arenas);
  s.set_pid(memory.master_pid());
  *s.mutable_service() = memory;
  return s;
}

}  // namespace procfs
}  // namespace rsslab
