#include "ctl/inspect_processes.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/procfs/procfs.h"

namespace rsslab {
namespace {

using ::rsslab::v1::InspectReport;

// Splits "PREFIX_M" / "PREFIX-N_M" names; false when the name has no
// "_digits" tail.
bool SplitWorkerName(absl::string_view name, absl::string_view* prefix, int* worker) {
  const size_t us = name.rfind('_');
  if (us == absl::string_view::npos || us == 0 || us + 1 >= name.size()) return false;
  absl::string_view digits = name.substr(us + 1);
  if (digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) {
    return false;
  }
  *prefix = name.substr(0, us);
  return absl::SimpleAtoi(digits, worker);
}

struct NamedPool {
  int threads = 0;
  std::set<int> workers;
  int zeros = 0;  // threads named ..._0: one per executor
};

void AddNamedPool(InspectReport* r, const std::string& name, int threads, int executors,
                  std::string why) {
  auto* p = r->add_pools();
  p->set_name(name);
  p->set_size(threads);
  p->set_threads(threads);
  p->set_executors(executors);
  p->set_why(std::move(why));
  p->set_matched_by("thread names");
}

// "ThreadPoolExecutor-N" -> N, or -1.
int ExecutorIndex(absl::string_view prefix) {
  int n = -1;
  if (!absl::ConsumePrefix(&prefix, "ThreadPoolExecutor-") || !absl::SimpleAtoi(prefix, &n)) {
    return -1;
  }
  return n;
}

}  // namespace

std::string Cmdline(int pid) {
  absl::StatusOr<std::string> c = procfs::ReadProcFile(pid, "cmdline");
  if (!c.ok()) return "";
  std::string s = c->substr(0, 256);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  std::replace(s.begin(), s.end(), '\0', ' ');
  return s;
}

void RecognizeNamedPools(InspectReport* r) {
  std::map<std::string, NamedPool> pools;  // by prefix
  int cut = 0;
  for (const auto& n : r->by_comm()) {
    absl::string_view name = n.comm();
    absl::string_view prefix;
    int worker = 0;
    if (name == "ThreadPoolExecu" ||
        (absl::StartsWith(name, "ThreadPoolExecu") && !SplitWorkerName(name, &prefix, &worker))) {
      cut += n.count();  // the 15-byte cut of ThreadPoolExecutor-N_M
      continue;
    }
    if (!SplitWorkerName(name, &prefix, &worker)) continue;
    if (!std::any_of(prefix.begin(), prefix.end(), absl::ascii_isalpha)) continue;
    NamedPool& p = pools[std::string(prefix)];
    p.threads += n.count();
    p.workers.insert(worker);
    if (worker == 0) p.zeros += n.count();
  }
  for (const auto& [prefix, p] : pools) {
    const int executor = ExecutorIndex(prefix);
    if (executor >= 0) {
      AddNamedPool(r, prefix, p.threads, 1,
                   absl::StrCat("concurrent.futures threads ", prefix, "_M: executor ", executor,
                                ", workers 0..", *p.workers.rbegin(),
                                " (grpcio's server pool and gunicorn's gthread workers are these)"));
    } else if (prefix == "asyncio") {
      AddNamedPool(r, "asyncio default executor", p.threads, p.zeros,
                   absl::StrCat("threads asyncio_M: ", p.zeros, " executor", p.zeros == 1 ? "" : "s",
                                " (one asyncio_0 each), workers 0..", *p.workers.rbegin()));
    } else if (p.zeros > 0 || p.threads >= 2) {
      AddNamedPool(r, absl::StrCat(prefix, "_M"), p.threads, p.zeros,
                   absl::StrCat("threads ", prefix, "_M (a thread_name_prefix): ", p.zeros,
                                " with worker 0, workers 0..", *p.workers.rbegin()));
    }
  }
  if (cut > 0) {
    AddNamedPool(r, "ThreadPoolExecutor", cut, 0,
                 "threads ThreadPoolExecu: ThreadPoolExecutor-N_M cut to 15 bytes by the kernel, "
                 "executors not told apart");
  }
}

std::string ProcessModel(absl::string_view comm, absl::string_view cmdline,
                         absl::string_view parent_comm, int same_exe_children) {
  // setproctitle's titles first: gunicorn sets them when it is installed.
  if (absl::StartsWith(cmdline, "gunicorn: master")) return "gunicorn master";
  if (absl::StartsWith(cmdline, "gunicorn: worker")) return "gunicorn worker";
  for (absl::string_view server : {"gunicorn", "uvicorn"}) {
    if (comm != server) continue;  // the script's name, from its #! line
    if (parent_comm == server) return absl::StrCat(server, " worker");
    return same_exe_children > 0 ? absl::StrCat(server, " master") : std::string(server);
  }
  // uvicorn --workers spawns its workers through multiprocessing.
  if (parent_comm == "uvicorn" && absl::StrContains(cmdline, "multiprocessing")) {
    return "uvicorn worker";
  }
  return same_exe_children > 0 ? "pre-fork master" : "";
}

int ParentPid(absl::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == absl::string_view::npos) return -1;
  std::vector<absl::string_view> f =
      absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
  int ppid = -1;
  if (f.size() < 2 || !absl::SimpleAtoi(f[1], &ppid)) return -1;
  return ppid;
}

void ReadChildren(int pid, InspectReport* r) {
  DIR* d = opendir("/proc");
  if (d == nullptr) return;
  struct Child {
    uint64_t start;
    int pid;
    std::string comm;
  };
  std::vector<Child> kids;
  int total = 0;
  while (struct dirent* e = readdir(d)) {
    int child = 0;
    if (!absl::ascii_isdigit(e->d_name[0]) || !absl::SimpleAtoi(e->d_name, &child)) continue;
    absl::StatusOr<std::string> stat = procfs::ReadProcFile(child, "stat");
    if (!stat.ok() || ParentPid(*stat) != pid) continue;
    procfs::ThreadView v;
    if (!procfs::ParseThreadStat(absl::StripAsciiWhitespace(*stat), &v)) continue;
    ++total;
    kids.push_back({v.start_ticks, child, std::string(v.comm)});
    // Bounded: keep the oldest kMaxChildren as they come.
    if (kids.size() > 2 * kMaxChildren) {
      std::sort(kids.begin(), kids.end(), [](const Child& a, const Child& b) {
        return std::tie(a.start, a.pid) < std::tie(b.start, b.pid);
      });
      kids.resize(kMaxChildren);
    }
  }
  closedir(d);
  std::sort(kids.begin(), kids.end(), [](const Child& a, const Child& b) {
    return std::tie(a.start, a.pid) < std::tie(b.start, b.pid);
  });
  if (kids.size() > static_cast<size_t>(kMaxChildren)) kids.resize(kMaxChildren);
  r->set_children_total(total);
  int same_exe = 0;
  for (const Child& k : kids) {
    auto* c = r->add_children();
    c->set_pid(k.pid);
    c->set_comm(k.comm);
    c->set_cmdline(Cmdline(k.pid));
    rsslab::v1::ProcStatus st;
    if (procfs::ReadStatus(k.pid, &st).ok()) {
      c->set_threads(st.threads());
      c->set_rss_bytes(st.rss_bytes());
    }
    char exe[4096];
    const std::string link = absl::StrCat("/proc/", k.pid, "/exe");
    const ssize_t n = readlink(link.c_str(), exe, sizeof(exe) - 1);
    const bool same = n > 0 && !r->exe().empty() && r->exe() == std::string(exe, n);
    if (same) ++same_exe;
    c->set_process_model(ProcessModel(c->comm(), c->cmdline(), r->comm(), 0));
  }
  std::string parent_comm;
  absl::StatusOr<std::string> stat = procfs::ReadProcFile(pid, "stat");
  const int ppid = stat.ok() ? ParentPid(*stat) : -1;
  if (ppid > 0) {
    absl::StatusOr<std::string> pc = procfs::ReadProcFile(ppid, "comm");
    if (pc.ok()) parent_comm = std::string(absl::StripTrailingAsciiWhitespace(*pc));
  }
  r->set_process_model(ProcessModel(r->comm(), r->cmdline(), parent_comm, same_exe));
}

}  // namespace rsslab
