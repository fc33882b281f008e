#include "ctl/inspect.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/untrusted_text.h"
#include "common/procfs/procfs.h"
#include "common/utf8_message.h"
#include "ctl/glibc_heap_walk.h"
#include "ctl/inspect_processes.h"
#include "registry/registry.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace rsslab {
namespace {

using ::rsslab::v1::InspectReport;

constexpr uint32_t kPfKthread = 0x00200000;  // include/linux/sched.h

// Variables that size thread pools or pick an allocator, kept from the start
// environment (procfs::AllocatorEnv keeps the allocator ones).
bool IsPoolVariable(absl::string_view key) {
  return absl::StartsWith(key, "OPENBLAS_") || key == "OMP_NUM_THREADS" ||
         key == "GOTO_NUM_THREADS" || key == "MKL_NUM_THREADS" || key == "PYTHON_CPU_COUNT" ||
         key == "XDG_RUNTIME_DIR";
}

double ClockTicks() {
  static const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  return hz > 0 ? hz : 100.0;
}

bool ProcessExists(int pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// A compact per-thread record: 10,000 threads cost ~300 KiB.
struct ThreadRec {
  uint64_t start = 0;
  int tid = 0;
  char state = '?';
  int name = 0;  // index into names
};

// Parses the Uid: line's real uid.
int RealUid(absl::string_view status_text) {
  absl::string_view v = procfs::StatusField(status_text, "Uid");
  int uid = -1;
  std::vector<absl::string_view> parts = absl::StrSplit(v, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (!parts.empty()) (void)absl::SimpleAtoi(parts[0], &uid);
  return uid;
}

double ReadUptimeSeconds() {
  std::ifstream in("/proc/uptime");
  double up = -1;
  in >> up;
  return in ? up : -1;
}

// Boot time (Unix seconds): /proc/stat's btime line.
int64_t BootTime() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      int64_t b = 0;
      in >> b;
      return in ? b : 0;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

void AddPartial(InspectReport* r, std::string why) {
  r->set_partial(true);
  r->add_partial_reasons(std::move(why));
}

// Reads the Control entry of the rsslab package through the registry
// (registry/registry.h): believed only when it is a small regular file of the
// target's user, in the entry format, naming this pid and its start time,
// and whose address is listened on by that process (CheckListener: a port
// closed and taken by another program is not reported as its Control).
// Only reported: no call is made here.
void ReadControlAddress(int pid, int uid, InspectReport* r) {
  std::vector<std::string> dirs;
  auto it = r->start_env().find("XDG_RUNTIME_DIR");
  if (it != r->start_env().end() && !it->second.empty()) dirs.push_back(it->second);
  dirs.push_back("/tmp");
  std::string notes;
  for (const std::string& dir : dirs) {
    const std::string path = registry::EntryPath(dir, pid);
    absl::StatusOr<registry::Entry> e = registry::ReadEntry(path, pid, registry::Trust{{uid}});
    if (absl::IsNotFound(e.status())) continue;
    if (e.ok()) {
      if (absl::Status l = registry::CheckListener(*e); !l.ok()) {
        absl::StrAppend(&notes, notes.empty() ? "" : "; ", path, " ignored: ", l.message());
        continue;
      }
      r->set_rsslab_control(e->address);
      r->set_rsslab_control_note(absl::StrCat("from ", path, ", service ", e->service));
      return;
    }
    absl::StrAppend(&notes, notes.empty() ? "" : "; ", path, " ignored: ", e.status().message());
  }
  r->set_rsslab_control_note(notes.empty() ? "not registered" : notes);
}

void ReadThreads(int pid, const InspectOptions& o, InspectReport* r, uint64_t proc_start) {
  std::vector<ThreadRec> recs;
  std::vector<std::string> names;
  std::map<std::string, int> name_index;
  std::map<std::pair<char, std::string>, int> waits;
  procfs::ThreadScan scan;
  absl::Status s = procfs::ForEachThread(
      pid, procfs::kThreadStat | procfs::kThreadWchan,
      [&](const procfs::ThreadView& t) {
        auto [it, added] = name_index.emplace(std::string(t.comm), static_cast<int>(names.size()));
        if (added) names.push_back(it->first);
        recs.push_back({t.start_ticks, t.tid, t.state, it->second});
        ++waits[{t.state, std::string(t.wchan)}];
      },
      &scan, o.max_threads);
  if (!s.ok()) {
    AddPartial(r, absl::StrCat("threads: ", s.message()));
    return;
  }
  if (scan.truncated) {
    AddPartial(r, absl::StrCat("threads: only the first ", o.max_threads, " were read"));
  }
  r->set_threads_vanished(scan.vanished);
  r->set_threads(static_cast<int32_t>(recs.size()));
  r->set_threads_running(static_cast<int32_t>(
      std::count_if(recs.begin(), recs.end(), [](const ThreadRec& t) { return t.state == 'R'; })));

  std::vector<int> per_name(names.size(), 0);
  for (const ThreadRec& t : recs) ++per_name[t.name];
  std::vector<std::pair<int, int>> order;  // (count, name)
  for (size_t i = 0; i < names.size(); ++i) order.push_back({per_name[i], static_cast<int>(i)});
  std::sort(order.begin(), order.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : names[a.second] < names[b.second];
  });
  for (const auto& [count, i] : order) {
    auto* n = r->add_by_comm();
    n->set_comm(names[i]);
    n->set_count(count);
  }
  std::vector<std::pair<std::pair<char, std::string>, int>> w(waits.begin(), waits.end());
  std::stable_sort(w.begin(), w.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [key, count] : w) {
    auto* tw = r->add_by_wait();
    tw->set_state(std::string(1, key.first));
    tw->set_wchan(key.second);
    tw->set_count(count);
  }

  // Batches: sorted by start time, a gap above the window starts a new one.
  std::sort(recs.begin(), recs.end(),
            [](const ThreadRec& a, const ThreadRec& b) {
              return a.start != b.start ? a.start < b.start : a.tid < b.tid;
            });
  const double hz = ClockTicks();
  const uint64_t window = static_cast<uint64_t>(absl::ToDoubleSeconds(o.batch_window) * hz + 0.5);
  r->set_batch_window_s(absl::ToDoubleSeconds(o.batch_window));
  int dropped = 0;
  for (size_t i = 0; i < recs.size();) {
    size_t j = i + 1;
    while (j < recs.size() && recs[j].start - recs[j - 1].start <= window) ++j;
    if (r->batches_size() >= o.max_batches) {
      dropped += static_cast<int>(j - i);
      i = j;
      continue;
    }
    auto* b = r->add_batches();
    b->set_index(r->batches_size());
    b->set_count(static_cast<int32_t>(j - i));
    b->set_start_s((static_cast<double>(recs[i].start) - static_cast<double>(proc_start)) / hz);
    b->set_span_s(static_cast<double>(recs[j - 1].start - recs[i].start) / hz);
    std::map<int, int> in_batch;
    int idle = 0;
    for (size_t k = i; k < j; ++k) {
      ++in_batch[recs[k].name];
      if (recs[k].state == 'S') ++idle;
      if (recs[k].tid == pid) b->set_has_main(true);
    }
    b->set_idle(idle);
    std::vector<std::pair<int, int>> bn;
    for (const auto& [name, count] : in_batch) bn.push_back({count, name});
    std::sort(bn.begin(), bn.end(), [](const auto& a, const auto& c) { return a.first > c.first; });
    for (const auto& [count, name] : bn) {
      auto* n = b->add_names();
      n->set_comm(names[name]);
      n->set_count(count);
    }
    i = j;
  }
  r->set_threads_in_dropped_batches(dropped);
}

int EnvInt(const InspectReport& r, const char* key) {
  auto it = r.start_env().find(key);
  int v = 0;
  if (it == r.start_env().end() || !absl::SimpleAtoi(it->second, &v) || v < 1) return 0;
  return v;
}

// The default pools to look for, and which batches match them.
void RecognizePools(InspectReport* r) {
  struct Pool {
    std::string name;
    int size;
    std::string why;
    // A library's pool starts once, when it loads: only the first batch of
    // its size is it. Python makes a default executor per event loop.
    bool once = true;
  };
  std::vector<Pool> pools;
  if (!r->python_version().empty()) {
    // Python 3.13 sizes the default executor from os.process_cpu_count()
    // (the affinity, or PYTHON_CPU_COUNT); older versions from
    // os.cpu_count() (the online CPUs, whatever the affinity).
    int major = 0, minor = 0;
    std::vector<absl::string_view> mm = absl::StrSplit(r->python_version(), '.');
    if (mm.size() == 2) {
      (void)absl::SimpleAtoi(mm[0], &major);
      (void)absl::SimpleAtoi(mm[1], &minor);
    }
    const bool affinity = major > 3 || (major == 3 && minor >= 13);
    int cpus = affinity ? r->cpus_allowed() : r->cpus_online();
    std::string src = affinity ? "process_cpu_count" : "os.cpu_count()";
    if (affinity && EnvInt(*r, "PYTHON_CPU_COUNT") > 0) {
      cpus = EnvInt(*r, "PYTHON_CPU_COUNT");
      src = "PYTHON_CPU_COUNT";
    }
    if (cpus > 0) {
      pools.push_back({"ThreadPoolExecutor default", DefaultExecutorWorkers(cpus),
                       absl::StrCat("min(32, cpus + 4), cpus = ", cpus, " (", src, ")"), false});
    }
  }
  auto has_lib = [&](absl::string_view prefix) {
    for (const std::string& l : r->libraries()) {
      size_t slash = l.rfind('/');
      if (absl::StartsWith(absl::string_view(l).substr(slash == std::string::npos ? 0 : slash + 1),
                           prefix)) {
        return true;
      }
    }
    return false;
  };
  const int cpus = r->cpus_allowed() > 0 ? r->cpus_allowed() : r->cpus_online();
  if (has_lib("libopenblas")) {
    // OpenBLAS (pthreads build) starts N - 1 workers when loaded (the calling
    // thread is the Nth): N from OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS,
    // OMP_NUM_THREADS, else the CPUs in its affinity.
    int n = cpus;
    std::string why = absl::StrCat("cpus - 1, cpus = ", cpus);
    for (const char* k : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
      if (EnvInt(*r, k) > 0) {
        n = EnvInt(*r, k);
        why = absl::StrCat(k, " - 1 = ", n - 1);
        break;
      }
    }
    if (n - 1 >= 1) pools.push_back({"OpenBLAS", n - 1, why});
  }
  if (has_lib("libmkl_") || has_lib("libgomp") || has_lib("libiomp") || has_lib("libomp")) {
    int n = EnvInt(*r, "OMP_NUM_THREADS") > 0 ? EnvInt(*r, "OMP_NUM_THREADS") : cpus;
    if (has_lib("libmkl_") && EnvInt(*r, "MKL_NUM_THREADS") > 0) n = EnvInt(*r, "MKL_NUM_THREADS");
    if (n - 1 >= 1) {
      pools.push_back({has_lib("libmkl_") ? "MKL/OpenMP" : "OpenMP", n - 1,
                       absl::StrCat("OpenMP team - 1, team = ", n)});
    }
  }
  for (const Pool& p : pools) {
    int batches = 0;
    for (auto& b : *r->mutable_batches()) {
      // The main thread is never a pool's: it started the process.
      const int workers = b.count() - (b.has_main() ? 1 : 0);
      if (workers == p.size && b.pool().empty()) {
        ++batches;
        b.set_pool(p.name);
        if (p.once) break;
      }
    }
    // Only a pool some batch matched is there: a size looked for and not
    // found is no pool.
    if (batches == 0) continue;
    auto* ps = r->add_pools();
    ps->set_name(p.name);
    ps->set_size(p.size);
    ps->set_why(p.why);
    ps->set_batches(batches);
    ps->set_threads(batches * p.size);
    ps->set_matched_by("batch size");
  }
}

}  // namespace

std::string ControlAddressFile(absl::string_view dir, int pid) {
  return registry::EntryPath(dir, pid);
}

std::string PythonVersionFromPath(absl::string_view path) {
  // The last "python" followed by digit.digits in the path.
  for (size_t pos = path.rfind("python"); pos != absl::string_view::npos;
       pos = pos == 0 ? absl::string_view::npos : path.rfind("python", pos - 1)) {
    absl::string_view rest = path.substr(pos + 6);
    size_t i = 0;
    while (i < rest.size() && absl::ascii_isdigit(rest[i])) ++i;
    if (i == 0 || i >= rest.size() || rest[i] != '.') continue;
    size_t j = i + 1;
    while (j < rest.size() && absl::ascii_isdigit(rest[j])) ++j;
    if (j == i + 1) continue;
    return std::string(rest.substr(0, j));
  }
  return "";
}

namespace {

// Step 1, stat: does the process exist, is it a kernel thread, its age.
// `main->comm` points into a buffer local to this call: use r->comm() after.
absl::Status ReadStatSection(int pid, InspectReport* r, procfs::ThreadView* main,
                             int64_t* start_unix) {
  absl::StatusOr<std::string> stat = procfs::ReadProcFile(pid, "stat");
  if (!stat.ok()) {
    if (absl::IsPermissionDenied(stat.status())) {
      return absl::PermissionDeniedError(absl::StrCat("pid ", pid, ": ", stat.status().message()));
    }
    return absl::NotFoundError(absl::StrCat("no process with pid ", pid));
  }
  if (!procfs::ParseThreadStat(absl::StripAsciiWhitespace(*stat), main)) {
    return absl::NotFoundError(absl::StrCat("pid ", pid, ": unreadable /proc/", pid, "/stat"));
  }
  r->set_comm(std::string(main->comm));
  if (main->flags & kPfKthread) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pid ", pid, " is a kernel thread (", main->comm, "): it has no user memory to inspect"));
  }
  const double hz = ClockTicks();
  const double uptime = ReadUptimeSeconds();
  if (uptime > 0) {
    r->set_age_s(std::round((uptime - static_cast<double>(main->start_ticks) / hz) * 100) / 100);
  }
  const int64_t boot = BootTime();
  *start_unix =
      boot > 0 ? boot + static_cast<int64_t>(static_cast<double>(main->start_ticks) / hz) : 0;
  return absl::OkStatus();
}

// Step 2, status: memory figures, uid, affinity.
absl::Status ReadStatusSection(int pid, char main_state, InspectReport* r) {
  absl::StatusOr<procfs::MappedText> status = procfs::MappedText::Read(pid, "status");
  if (!status.ok()) return absl::NotFoundError(absl::StrCat("pid ", pid, " exited before it could be read"));
  absl::Status ps = procfs::ParseStatus(status->view(), r->mutable_status());
  // A main thread in Z with memory still mapped is a process whose main
  // thread called pthread_exit: the others carry on, so it is inspected.
  if (!ps.ok() && main_state == 'Z') {
    return absl::FailedPreconditionError(absl::StrCat(
        "pid ", pid, " (", r->comm(), ") is a zombie: it has exited, its parent has not reaped it"));
  }
  if (!ps.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("pid ", pid, " (", r->comm(), ") has no memory (VmRSS) to inspect: a kernel thread or exiting"));
  }
  r->set_uid(RealUid(status->view()));
  r->set_cpus_allowed(procfs::CountCpuList(procfs::StatusField(status->view(), "Cpus_allowed_list")));
  r->set_cpus_online(static_cast<int32_t>(sysconf(_SC_NPROCESSORS_ONLN)));
  return absl::OkStatus();
}

// Step 3, maps: the file everything else about libraries comes from. Another
// user's process refuses it (ptrace-read access): a clear error, not a
// report of nothing. Other failures leave *maps empty and mark the report partial.
absl::Status ReadMapsSection(int pid, InspectReport* r, std::optional<std::string>* maps) {
  absl::StatusOr<std::string> m = procfs::ReadProcFile(pid, "maps");
  if (!m.ok()) {
    if (absl::IsPermissionDenied(m.status())) {
      return absl::PermissionDeniedError(absl::StrCat(
          "pid ", pid, " (", r->comm(), ") belongs to uid ", r->uid(), "; reading its maps needs that user or root (",
          m.status().message(), ")"));
    }
    if (!ProcessExists(pid)) return absl::NotFoundError(absl::StrCat("pid ", pid, " exited while being read"));
    AddPartial(r, absl::StrCat("maps: ", m.status().message()));
  } else {
    *maps = *std::move(m);
  }
  char exe[4096];
  std::string exe_link = absl::StrCat("/proc/", pid, "/exe");
  ssize_t n = readlink(exe_link.c_str(), exe, sizeof(exe) - 1);
  if (n > 0) r->set_exe(std::string(exe, static_cast<size_t>(n)));
  r->set_cmdline(Cmdline(pid));
  return absl::OkStatus();
}

// Step 4, the start environment: allocator and pool variables.
void ReadEnvSection(int pid, InspectReport* r) {
  absl::StatusOr<std::map<std::string, std::string>> env = procfs::ReadEnviron(pid);
  if (env.ok()) {
    for (const auto& [k, v] : procfs::AllocatorEnv(*env)) (*r->mutable_start_env())[k] = v;
    for (const auto& [k, v] : *env) {
      if (IsPoolVariable(k)) (*r->mutable_start_env())[k] = v.substr(0, 4096);
    }
  } else {
    AddPartial(r, absl::StrCat("environ: ", env.status().message()));
  }
}

// The allocator and the libraries that matter, from maps.
void ReadLibraries(int pid, const std::string& maps, InspectReport* r) {
  procfs::MappedAllocator a = procfs::DetectAllocator(maps);
  r->set_allocator(a.name);
  r->set_allocator_library(a.library);
  for (const char* prefix : {"libopenblas", "libmkl_rt", "libmkl_core", "libgomp", "libiomp",
                             "libomp", "libpython", "libjemalloc", "libmimalloc", "libtcmalloc"}) {
    std::string p = procfs::MappedPath(maps, prefix, ".so");
    if (!p.empty()) r->add_libraries(p);
  }
  // The package's extension module: _rsslab*.so anywhere, or the
  // package's own layout, rsslab/_native*.so; not _rsslab_grpc*.so, the
  // native Control transport, which only ever comes with the first.
  std::string mod = procfs::FirstMappedPath(maps, [](absl::string_view path) {
    size_t slash = path.rfind('/');
    absl::string_view base = slash == absl::string_view::npos ? path : path.substr(slash + 1);
    if (!absl::StrContains(base, ".so")) return false;
    return (absl::StartsWith(base, "_rsslab") && !absl::StartsWith(base, "_rsslab_grpc")) ||
           (absl::StartsWith(base, "_native") && slash != absl::string_view::npos &&
            absl::EndsWith(path.substr(0, slash), "/rsslab"));
  });
  if (!mod.empty()) {
    r->set_rsslab_loaded(true);
    r->set_rsslab_module(mod);
    ReadControlAddress(pid, r->uid(), r);
  }
}

// Python: the executable's name, else a mapped libpython or lib-dynload module.
void DetectPython(const std::string& maps, InspectReport* r) {
  std::string v = PythonVersionFromPath(r->exe());
  std::string src = r->exe();
  if (v.empty()) {
    for (const char* prefix : {"libpython", "_"}) {
      std::string p = procfs::MappedPath(maps, prefix, "cpython-");
      if (p.empty() && absl::string_view(prefix) == "libpython") p = procfs::MappedPath(maps, prefix);
      if (!p.empty() && !PythonVersionFromPath(p).empty()) {
        v = PythonVersionFromPath(p);
        src = p;
        break;
      }
    }
  }
  if (!v.empty()) {
    r->set_python_version(v);
    r->set_python_source(src);
  }
}

}  // namespace

absl::StatusOr<InspectReport> BuildInspectReport(int pid, const InspectOptions& o) {
  const absl::Time t0 = absl::Now();
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("--pid must be > 0, not ", pid));
  InspectReport r;
  r.set_pid(pid);
  r.set_unix_nanos(absl::ToUnixNanos(t0));
  procfs::ThreadView main;
  int64_t start_unix = 0;
  if (absl::Status s = ReadStatSection(pid, &r, &main, &start_unix); !s.ok()) return s;
  if (absl::Status s = ReadStatusSection(pid, main.state, &r); !s.ok()) return s;
  std::optional<std::string> maps;
  if (absl::Status s = ReadMapsSection(pid, &r, &maps); !s.ok()) return s;
  ReadEnvSection(pid, &r);
  absl::Status ss = procfs::ReadSmaps(pid, o.top_mappings, r.mutable_memory_map());
  if (!ss.ok()) AddPartial(&r, absl::StrCat("smaps: ", ss.message()));
  if (maps.has_value()) {
    ReadLibraries(pid, *maps, &r);
    DetectPython(*maps, &r);
  }
  ReadThreads(pid, o, &r, main.start_ticks);
  RecognizePools(&r);
  RecognizeNamedPools(&r);
  ReadChildren(pid, &r);
  if (maps.has_value() && r.allocator() == "glibc") {
    WalkGlibcHeaps(pid, *maps, r.mutable_heap_walk(), o.heap_walk_budget);
  }
  // Every string the target controls (thread names, environment, command
  // line, paths) made valid UTF-8, as protobuf's string fields must be: the
  // JSON stays valid and the serializer logs nothing; the text report
  // escapes what it prints.
  ReplaceInvalidUtf8(&r, Utf8Fix::kReplacement);
  if (!ProcessExists(pid)) AddPartial(&r, "the process exited while being read");
  r.set_inspect_duration_us(absl::ToInt64Microseconds(absl::Now() - t0));
  return r;
}

absl::StatusOr<rsslab::v1::InspectSample> TakeInspectSample(int pid, rsslab::v1::ProcStatus* status,
                                                           rsslab::v1::MemoryMap* map) {
  rsslab::v1::InspectSample s;
  s.set_pid(pid);
  s.set_unix_nanos(absl::ToUnixNanos(absl::Now()));
  rsslab::v1::ProcStatus st;
  absl::Status a = procfs::ReadStatus(pid, &st);
  if (!a.ok()) {
    if (!ProcessExists(pid)) return absl::NotFoundError(absl::StrCat("pid ", pid, " exited"));
    return a;
  }
  rsslab::v1::MemoryMap mm;
  absl::Status b = procfs::ReadSmaps(pid, 0, &mm);
  if (!b.ok()) {
    if (!ProcessExists(pid)) return absl::NotFoundError(absl::StrCat("pid ", pid, " exited"));
    if (absl::IsPermissionDenied(b)) return b;
    s.set_partial(true);
  }
  s.set_rss_bytes(st.rss_bytes());
  s.set_threads(st.threads());
  s.set_arenas(mm.arena_count());
  s.set_arena_rss_bytes(mm.arena_rss_bytes());
  if (status != nullptr) *status = st;
  if (map != nullptr) *map = mm;
  return s;
}

}  // namespace rsslab
