#include "ctl/inspect_rules.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctl/snapshot_text.h"

namespace rsslab {
namespace {

using ::rsslab::v1::Finding;
using ::rsslab::v1::InspectReport;
using ::rsslab::v1::ThreadBatch;

std::string Names(const ThreadBatch& b) {
  std::vector<std::string> out;
  for (const auto& n : b.names()) out.push_back(absl::StrCat(n.comm(), " x", n.count()));
  return absl::StrJoin(out, ", ");
}

std::string BatchLine(const ThreadBatch& b) {
  return absl::StrFormat("batch %d: %d thread%s at +%.1f s (%s), %d idle", b.index(), b.count(),
                         b.count() == 1 ? "" : "s", b.start_s(), Names(b), b.idle());
}

const rsslab::v1::PoolSize* FindPool(const InspectReport& r, absl::string_view name) {
  for (const auto& p : r.pools()) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

bool EnvHas(const InspectReport& r, const std::string& key) {
  return r.start_env().find(key) != r.start_env().end();
}

std::string Env(const InspectReport& r, const std::string& key) {
  auto it = r.start_env().find(key);
  return it == r.start_env().end() ? "" : it->second;
}

Finding* Add(InspectReport* r, const char* rule, const char* severity) {
  Finding* f = r->add_findings();
  f->set_rule(rule);
  f->set_severity(severity);
  return f;
}

// Seed 002: one default ThreadPoolExecutor per nested asyncio.run(), its
// threads kept alive by fire-and-forget to_thread tasks.
void ExecutorBatches(InspectReport* r) {
  const auto* pool = FindPool(*r, "ThreadPoolExecutor default");
  if (pool == nullptr) return;
  std::vector<const ThreadBatch*> hits;
  for (const auto& b : r->batches()) {
    if (b.pool() == pool->name()) hits.push_back(&b);
  }
  if (static_cast<int>(hits.size()) < kExecutorBatches) return;
  Finding* f = Add(r, "executor_batches", "leak");
  f->set_summary(absl::StrFormat(
      "%d threads in %d batches of exactly %d (= %s): default ThreadPoolExecutors created per "
      "asyncio.run() and never shut down",
      static_cast<int>(hits.size()) * pool->size(), hits.size(), pool->size(), pool->why()));
  for (const ThreadBatch* b : hits) f->add_evidence(BatchLine(*b));
  f->add_evidence(absl::StrCat(r->threads(), " threads in all; python ", r->python_version()));
  f->set_fix(
      "cap the executor: run each loop with asyncio.Runner() and "
      "loop.set_default_executor(ThreadPoolExecutor(max_workers=4)) instead of asyncio.run(); "
      "await fire-and-forget asyncio.to_thread() tasks (asyncio.gather) before returning");
}

// Seed 002, part 2/3: arenas left behind by short-lived threads, and
// MALLOC_ARENA_MAX that only works in the start environment.
void GlibcArenas(InspectReport* r) {
  if (r->allocator() != "glibc") return;
  const auto& mm = r->memory_map();
  if (mm.arena_count() < kManyArenas || mm.arena_rss_bytes() < kArenaResidentBytes) return;
  const bool capped = EnvHas(*r, "MALLOC_ARENA_MAX") ||
                      absl::StrContains(Env(*r, "GLIBC_TUNABLES"), "glibc.malloc.arena_max");
  if (capped) return;
  Finding* f = Add(r, "glibc_arenas", "leak");
  f->set_summary(absl::StrFormat(
      "%d glibc arenas, %s resident, MALLOC_ARENA_MAX not in the start environment", mm.arena_count(),
      Mib(mm.arena_rss_bytes())));
  f->add_evidence(absl::StrFormat(
      "smaps: %d thread-arena heaps (64 MiB aligned), %s resident; brk heap %s; %d threads now",
      mm.arena_count(), Mib(mm.arena_rss_bytes()), Mib(mm.heap_rss_bytes()), r->threads()));
  f->add_evidence(absl::StrFormat(
      "glibc's limit without it: 8 x %d cpus = %d arenas; /proc/%d/environ has no MALLOC_ARENA_MAX "
      "(setting it from inside the process, e.g. os.environ, does nothing)",
      r->cpus_online(), 8 * r->cpus_online(), r->pid()));
  f->set_fix(
      "set MALLOC_ARENA_MAX=2 (or 4) in the environment the process starts with (systemd "
      "Environment=, Dockerfile ENV, the task runner), or call rsslab.cap_arenas() early; "
      "malloc_trim(0) after a burst gives the free part back");
}

// Seed 002: OpenBLAS starts its pool at import numpy; a service that never
// calls BLAS keeps it idle for its lifetime.
void PoolIdle(InspectReport* r, const char* pool_name, const char* rule, const char* lib_part,
              const char* env_fix) {
  const auto* pool = FindPool(*r, pool_name);
  if (pool == nullptr) return;
  for (const auto& b : r->batches()) {
    if (b.pool() != pool_name) continue;
    const int workers = b.count() - (b.has_main() ? 1 : 0);
    const int idle = b.idle() - (b.has_main() ? 1 : 0);
    if (workers <= 0 || idle < workers) continue;
    Finding* f = Add(r, rule, "waste");
    std::string lib;
    for (const std::string& l : r->libraries()) {
      if (absl::StrContains(l.substr(l.rfind('/') + 1), lib_part)) {
        lib = l;
        break;
      }
    }
    f->set_summary(absl::StrFormat("%s mapped with %d thread%s, all idle (%s)", pool_name, workers,
                                   workers == 1 ? "" : "s", pool->why()));
    f->add_evidence(BatchLine(b));
    if (!lib.empty()) f->add_evidence(absl::StrCat("mapped: ", lib));
    std::vector<std::string> env;
    for (const auto& [k, v] : r->start_env()) {
      if (absl::StartsWith(k, "OPENBLAS_") || absl::StrContains(k, "NUM_THREADS")) {
        env.push_back(absl::StrCat(k, "=", v));
      }
    }
    f->add_evidence(env.empty() ? "start environment: no thread-count variable"
                                : absl::StrCat("start environment: ", absl::StrJoin(env, " ")));
    f->set_fix(env_fix);
    return;
  }
}

// The overload of the user's grpcio service: RSS stayed up after the burst
// because the freed memory sits inside glibc's brk heap (main thread), where
// MALLOC_ARENA_MAX does nothing and only malloc_trim(0) gives it back.
void RetainedHeap(InspectReport* r) {
  if (r->allocator() != "glibc") return;
  const auto& w = r->heap_walk();
  const int64_t rss = r->status().rss_bytes();
  const int64_t brk = w.walked() ? w.trimmable_bytes() : 0;
  const int64_t trim = brk + w.arena_trimmable_bytes();
  if (trim < kRetainedBytes || rss <= 0 || trim * 100 < rss * kRetainedPercent) return;
  // A process still in its burst needs the memory: few threads running.
  const int busy_limit = r->threads() / 4 > 2 ? r->threads() / 4 : 2;
  if (r->threads_running() > busy_limit) return;
  const auto& mm = r->memory_map();
  Finding* f = Add(r, "retained_heap", "waste");
  f->set_summary(absl::StrFormat(
      "%s free in resident pages of glibc's heaps (brk heap %s, %d arena heap%s %s): "
      "malloc_trim(0) would take RSS from %s to about %s",
      Mib(trim), Mib(brk), w.arena_heaps_walked(), w.arena_heaps_walked() == 1 ? "" : "s",
      Mib(w.arena_trimmable_bytes()), Mib(rss), Mib(rss - trim)));
  if (w.walked()) {
    f->add_evidence(absl::StrFormat(
        "brk heap walk (/proc/%d/mem): %s, %d chunks, %d free holding %s (top chunk %s); "
        "resident whole pages inside them %s",
        r->pid(), Mib(w.heap_bytes()), w.chunks(), w.free_chunks(), Mib(w.free_bytes()),
        Mib(w.top_bytes()), Mib(w.trimmable_bytes())));
  }
  f->add_evidence(absl::StrFormat(
      "arena heaps walked: %d of %d, %d chunks, free %s, resident whole pages inside them %s",
      w.arena_heaps_walked(), mm.arena_count(), w.arena_chunks(), Mib(w.arena_free_bytes()),
      Mib(w.arena_trimmable_bytes())));
  f->add_evidence(absl::StrFormat(
      "smaps: brk heap %s resident, %d arena heaps %s; %d of %d threads running; hwm %s",
      Mib(mm.heap_rss_bytes()), mm.arena_count(), Mib(mm.arena_rss_bytes()), r->threads_running(),
      r->threads(), Mib(r->status().hwm_bytes())));
  std::string fix =
      "trim after the burst: in a Python service, the rsslab package's rsslab.release() (or "
      "auto_trim in rsslab.serve()) calls malloc_trim on the process's threads";
  if (!r->rsslab_control().empty()) {
    // By pid, not the address read now: rsslab_ctl checks the entry (live,
    // whose) again when it calls, and a port can change hands by then.
    absl::StrAppend(&fix, "; this process serves Control (at ", r->rsslab_control(),
                    "): rsslab_ctl trim --control=pid:", r->pid(),
                    r->uid() == static_cast<int64_t>(geteuid())
                        ? ""
                        : absl::StrCat(" --as_user=", r->uid()));
  } else {
    absl::StrAppend(&fix, "; where Control is served (rsslab_server, rsslab.serve()): "
                          "rsslab_ctl trim --control=HOST:PORT");
  }
  const bool capped = EnvHas(*r, "MALLOC_ARENA_MAX") ||
                      absl::StrContains(Env(*r, "GLIBC_TUNABLES"), "glibc.malloc.arena_max");
  if (brk * 2 >= trim) {
    absl::StrAppend(&fix, ". MALLOC_ARENA_MAX does not help here: this is the main heap");
  } else if (!capped) {
    absl::StrAppend(&fix, ". Fewer arenas (MALLOC_ARENA_MAX=2 at start) bound how many can hold "
                          "free memory like this");
  }
  f->set_fix(fix);
}

void JemallocBackground(InspectReport* r) {
  if (r->allocator() != "jemalloc") return;
  int bg = 0;
  for (const auto& n : r->by_comm()) {
    if (n.comm() == "jemalloc_bg_thd") bg += n.count();
  }
  if (bg == 0) return;
  Finding* f = Add(r, "jemalloc_bg", "expected");
  f->set_summary(absl::StrFormat("jemalloc mapped, background_thread on: %d jemalloc_bg_thd thread%s (expected)",
                                 bg, bg == 1 ? "" : "s"));
  f->add_evidence(absl::StrCat("mapped: ", r->allocator_library()));
  for (const char* k : {"MALLOC_CONF", "JE_MALLOC_CONF", "_RJEM_MALLOC_CONF", "LD_PRELOAD"}) {
    if (EnvHas(*r, k)) f->add_evidence(absl::StrCat(k, "=", Env(*r, k)));
  }
  f->set_fix(
      "nothing to fix: they purge dirty pages in the background, so idle memory goes back "
      "(MALLOC_CONF=background_thread:false turns them off)");
}

}  // namespace

void Diagnose(InspectReport* r) {
  r->clear_findings();
  ExecutorBatches(r);
  GlibcArenas(r);
  PoolIdle(r, "OpenBLAS", "openblas_idle", "libopenblas",
           "OPENBLAS_NUM_THREADS=1 in the environment before numpy is imported (OpenBLAS reads "
           "it when it loads, so os.environ.setdefault at the very top of the entry script works "
           "too); skip it if the process does call BLAS");
  PoolIdle(r, "OpenMP", "openmp_idle", "omp",
           "OMP_NUM_THREADS=1 in the environment before the library loads, if the process does "
           "not need the parallel team");
  PoolIdle(r, "MKL/OpenMP", "openmp_idle", "libmkl",
           "MKL_NUM_THREADS=1 (and OMP_NUM_THREADS=1) before the library loads, if the process "
           "does not need the parallel team");
  RetainedHeap(r);
  JemallocBackground(r);
}

}  // namespace rsslab
