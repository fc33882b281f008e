// One scrape target for every worker of every registered service on this
// host: rsslab_exporter's scrape. Each scrape lists the registry again
// (registry/registry.h, ListAll: only entries the exporter's own user, or a
// user named with --as_user, owns), adds each worker's master (its parent,
// when that runs the same program as the worker and is trusted too), reads
// every process from /proc (common/procfs) and asks each worker's Control
// for a snapshot, all workers at once, each call with its own deadline.
// Series are built anew per scrape, so a worker that exits leaves none.
//
//   Fleet fleet(options);
//   std::string text = fleet.Metrics();  // Prometheus text
//   std::string sd = fleet.ServiceDiscovery();  // http_sd JSON of the workers' /metrics
#ifndef RSSLAB_EXPORTER_FLEET_H_
#define RSSLAB_EXPORTER_FLEET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/auth.h"
#include "common/metrics/exposition.h"
#include "exporter/recycling.h"
#include "registry/registry.h"
#include "proto/control.grpc.pb.h"
#include "proto/snapshot.pb.h"

namespace rsslab {
namespace exporter {

struct FleetOptions {
  std::vector<std::string> dirs;  // registry directories (registry::Dirs())
  registry::Trust trust;
  Security security;                          // the token sent to each Control
  absl::Duration control_timeout = absl::Seconds(2);  // per worker
  // A process's classified smaps (arenas, heap, stacks), maps (allocator)
  // and environ are read at most this often: reading smaps is most of a
  // scrape's cost and those figures move slowly. /proc/PID/status (RSS,
  // anon, threads) is read every scrape. Zero: everything every scrape.
  absl::Duration map_interval = absl::Seconds(60);
  // Extra families appended to every scrape (the cgroup's), or null.
  std::function<void(metrics::Exposition*)> extra;
  // The memory limit of the workers' cgroup (-1: none), or null: 90 % of it
  // shared by the workers is the budget of the recycling advice.
  std::function<int64_t()> memory_limit;
};

// One process of the fleet, as one scrape saw it.
struct Member {
  registry::Entry entry;  // a master's: only pid and service
  std::string role;       // "worker" | "master"
  std::string allocator_version;  // from Control (a master: its worker's), or ""
  uint64_t minor_faults = 0;      // /proc/PID/stat minflt
  bool has_regrowth = false;      // a trim seen: the fields below are set
  int64_t regrowth_bytes = 0;
  uint64_t regrowth_minor_faults = 0;
  bool has_burst_regrowth = false;  // the burst after the last trim has ended
  int64_t burst_regrowth_bytes = 0;
  uint64_t burst_regrowth_minor_faults = 0;
  uint64_t burst_requests = 0;
  bool has_recycling = false;     // followed since a first scrape: the fields below are set
  int64_t first_rss = 0;          // RSS at the exporter's first scrape of it
  RecyclingLimits recycling_limits;  // from its command line
  RecyclingAdvice recycling;
  bool proc_ok = false;
  rsslab::v1::Snapshot proc;  // from /proc (procfs::OutsideSnapshot)
  bool control_ok = false;
  std::string control_error;
  rsslab::v1::Snapshot control;  // GetSnapshot, workers only
};

// What one worker took back after its last trim, followed scrape by scrape
// (as fine as the scrape interval): within a minute after it, and by the
// end of the next burst. A burst, by the worker's request count: it starts
// at the first scrape whose count rose since the one before, and ends at
// the first scrape after that whose count did not.
struct Regrowth {
  int64_t trim_unix_nanos = 0;  // which trim (0: none seen yet)
  int64_t rss_after = 0;        // the trim's own rss_after_bytes
  int64_t max_rss = 0;          // the highest RSS seen in the minute after it
  uint64_t faults_start = 0;    // minor faults at the first scrape after it
  uint64_t faults_last = 0;     // ... and at the last within the minute
  uint64_t requests_last = 0;   // the request count at the last scrape
  bool burst_started = false;
  bool burst_done = false;
  uint64_t burst_first_requests = 0;  // the count just before the burst
  int64_t burst_max_rss = 0;          // the highest RSS from the trim to the burst's end
  uint64_t burst_faults = 0;          // minor faults from the first scrape to the burst's end
  uint64_t burst_requests = 0;        // requests in the burst
};
inline constexpr absl::Duration kRegrowthWindow = absl::Minutes(1);

// Moves `r` on with one scrape of the worker: a new trim (by its time)
// starts over; within kRegrowthWindow of the trim the RSS and faults now
// count, after it the figures stay; until the next burst has ended, so do
// they for the burst's figures.
void UpdateRegrowth(const rsslab::v1::TrimResult& last, int64_t rss_now, uint64_t faults_now,
                    uint64_t requests_now, absl::Time now, Regrowth* r);

// The masters of `workers`: each worker's parent that is not a registered
// worker itself, runs the same program (the same /proc/PID/exe and
// cmdline: a fork) and is owned by a trusted user. By pid, once each.
std::vector<Member> FindMasters(const std::vector<registry::Entry>& workers,
                                const registry::Trust& trust);

// The recycling limits on a worker's command line (a fork's is its
// master's); where the worker has retitled itself (setproctitle: gunicorn,
// Celery) and shows none, those of its parent, if its user is trusted.
RecyclingLimits LimitsOf(int pid, const registry::Trust& trust);

// "2.36", "5.3.0", "3.0.1", "gperftools 2.10" from a Control snapshot, or "".
std::string AllocatorVersion(const rsslab::v1::Snapshot& s);

// The series of one scrape (exposed for tests).
void AppendMembers(const std::vector<Member>& members, metrics::Exposition* e);

// Prometheus http_sd JSON: one target group per worker with a metrics=
// address: [{"targets":["HOST:PORT"],"labels":{"service":..,"pid":..}}].
std::string ServiceDiscoveryJson(const std::vector<Member>& members);

// Each member's last full /proc read (procfs::OutsideSnapshot), per
// (pid, start), kept between scrapes.
struct ProcRead {
  absl::Time at;
  rsslab::v1::Snapshot snapshot;
};
using ProcReads = std::map<std::pair<int, uint64_t>, ProcRead>;

// Fills each member's `proc`: a full read when its last one in `reads` is
// older than `interval` (or its pid now runs another process), else that
// one with a fresh /proc/PID/status. `reads` keeps only these members'.
void ReadProcs(std::vector<Member>* members, absl::Time now, absl::Duration interval,
               ProcReads* reads);

class Fleet {
 public:
  explicit Fleet(FleetOptions options) : options_(std::move(options)) {}

  // Lists, reads and asks every member now.
  std::vector<Member> Scan();
  std::string Metrics();
  std::string ServiceDiscovery();

 private:
  // Control snapshots of every worker with an address, in parallel.
  void AskControls(std::vector<Member>* members);
  rsslab::v1::Control::Stub* StubFor(const std::string& address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FleetOptions options_;
  absl::Mutex mu_;
  // One channel per Control address, kept while the address is listed
  // (a scrape every 15 s need not reconnect to 64 workers).
  std::map<std::string, std::unique_ptr<rsslab::v1::Control::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  // The allocator version per (pid, start): the label stays the same when
  // one Control call fails.
  std::map<std::pair<int, uint64_t>, std::string> versions_ ABSL_GUARDED_BY(mu_);
  // What the exporter follows of one worker across scrapes.
  struct History {
    Regrowth regrowth;  // after its last trim
    bool seen = false;  // the fields below are set
    int64_t first_rss = 0;
    uint64_t first_requests = 0;
    int64_t max_rss = 0;  // since the first scrape
    RecyclingLimits limits;
  };
  // Moves each worker's History on with this scrape and fills its
  // regrowth and recycling fields.
  void Follow(std::vector<Member>* members, absl::Time now, int64_t budget_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Per (pid, start).
  std::map<std::pair<int, uint64_t>, History> history_ ABSL_GUARDED_BY(mu_);
  ProcReads proc_reads_ ABSL_GUARDED_BY(mu_);
  int64_t ignored_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace exporter
}  // namespace rsslab

#endif  // RSSLAB_EXPORTER_FLEET_H_
