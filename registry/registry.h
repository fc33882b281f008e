// The registry of the rsslab package's Control services: every process that
// calls rsslab.serve() writes DIR/rsslab-control-<pid>.addr (DIR: its start
// environment's $XDG_RUNTIME_DIR, else /tmp). This is the one reader of those
// files, used by rsslab_ctl, the loadgen and inspect. The format
// (docs/PACKAGE.md, "Every worker of a service"):
//
//   127.0.0.1:41234        the bound Control address, always the first line
//   service=shop           the service's name: [A-Za-z0-9._-], 1..64 bytes
//   pid=1234               the writer's pid (must match the file name)
//   start=98765            its start time, /proc/PID/stat field 22 (ticks)
//   metrics=127.0.0.1:9464 optional: its own /metrics (serve(metrics=...))
//
// An entry is never trusted: it is used only while a process with that pid
// runs, started at that time (a reused pid is not believed), owned by the
// file's owner, and that owner is a user the reader trusts (CheckTrusted):
// its own uid, or one it named (--as_user). A service name is not an
// identity: anyone can write service=shop. Anything else is ignored with
// one line saying why.
//
//   registry::Listing l =
//       registry::ListService("shop", registry::Dirs(), registry::Trust::Self(), true);
//   for (const registry::Entry& w : l.workers) ... w.pid, w.address ...
#ifndef RSSLAB_REGISTRY_REGISTRY_H_
#define RSSLAB_REGISTRY_REGISTRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace registry {

// Bounds on what a reader accepts: a file (bytes), the files one directory
// scan reads, the workers one service may list.
inline constexpr size_t kMaxEntryBytes = 512;
inline constexpr int kMaxFilesPerDir = 1024;
inline constexpr int kMaxWorkers = 256;
inline constexpr size_t kMaxServiceName = 64;

// At most this many users named besides the reader, each at most this long.
inline constexpr int kMaxTrustedUsers = 32;
inline constexpr size_t kMaxUserName = 64;

struct Entry {
  std::string path;
  std::string address;  // HOST:PORT
  std::string service;
  int pid = 0;
  uint64_t start_ticks = 0;
  int uid = -1;  // the owner of the file and the process (set once trusted)
  std::string metrics_address;  // HOST:PORT of its /metrics, or ""
};

// Whose processes a reader sends its calls (and its token) to: always its
// own effective uid, others only when named. Root is no exception.
struct Trust {
  std::vector<int> uids;  // the reader's own first
  static Trust Self();
  bool Has(int uid) const;
};

// Trust::Self() plus each of `users`: a user name or a decimal uid (e.g. the
// values of --as_user=svc,1001). The error names the one not known.
absl::StatusOr<Trust> TrustUsers(const std::vector<std::string>& users);

// THE rule, for every reader of the registry (rsslab_ctl, the loadgen, an
// exporter listing workers): an entry is believed only when its file and
// the process it names are owned by one uid and `trust` has that uid. Else
// PermissionDenied in one line naming the uid (and user) and the
// --as_user= that would trust it. `process_uid` -1: not known (the process
// is gone), only the file is judged.
absl::Status CheckTrusted(const Trust& trust, int pid, int file_uid, int process_uid);

struct Ignored {
  std::string path;
  std::string why;     // one line
  bool removed = false;  // a stale entry of our own, deleted
};

struct Listing {
  std::vector<Entry> workers;  // by pid
  std::vector<Ignored> ignored;
};

// "DIR/rsslab-control-PID.addr".
std::string EntryPath(absl::string_view dir, int pid);

// A service name is 1..64 bytes of [A-Za-z0-9._-]; the error names it.
absl::Status CheckServiceName(absl::string_view name);

// The format alone (`text` is the file's content; `file_pid` the pid its
// name carries). The error says what is wrong, in one line.
absl::StatusOr<Entry> ParseEntry(absl::string_view text, int file_pid);

// "" while the entry's process runs with the entry's start time; else why
// not ("pid 12 is gone", "pid 12 started at 5, not 4: a reused pid").
std::string StaleReason(const Entry& e);

// One file: a regular file (not through a symlink) of at most
// kMaxEntryBytes, parsed, live and trusted (CheckTrusted). NotFound when
// there is no file; PermissionDenied when another user's.
absl::StatusOr<Entry> ReadEntry(const std::string& path, int file_pid, const Trust& trust);

// The directories a reader looks in: its own $XDG_RUNTIME_DIR (if a
// directory), then /tmp.
std::vector<std::string> Dirs();

// Every live, trusted worker of `service` in `dirs` (a pid seen twice
// counts once). Another user's entry claiming the service is ignored with
// the reason. With `clean`, a stale entry of a trusted user is removed
// (unless it was replaced since it was read).
Listing ListService(absl::string_view service, const std::vector<std::string>& dirs,
                    const Trust& trust, bool clean);

// ListService for every service at once (an exporter of all workers):
// every live, trusted entry, by pid, at most kMaxWorkers in all.
Listing ListAll(const std::vector<std::string>& dirs, const Trust& trust, bool clean);

// The live, trusted entry of one pid, from the first of `dirs` that has a
// file.
absl::StatusOr<Entry> FindPid(int pid, const std::vector<std::string>& dirs, const Trust& trust);

// The port in an entry is not taken on trust either: a worker may have
// closed it and another user bound it since. Before an entry's address is
// called (Resolve does this for every entry it returns), the socket
// listening on it in this network namespace (/proc/self/net/tcp and tcp6,
// state LISTEN; a 0.0.0.0 or :: listener serves the loopback address too)
// must be owned by the entry's uid, every one of them if several match, and,
// where /proc/PID/fd is readable, be one of the entry's process's own
// sockets. An address with no such listener (not local, or closed) cannot
// be checked and is refused: name it with --control=HOST:PORT to call it
// anyway. PermissionDenied in one line saying why.
inline constexpr int kMaxSocketLines = 1 << 20;  // per /proc/net/tcp{,6}
inline constexpr int kMaxProcessFds = 1 << 20;
absl::Status CheckListener(const Entry& e);

// What a --control value names: a HOST:PORT, every worker of a service
// ("all:NAME"), or one registered worker ("pid:PID").
struct ControlSpec {
  enum class Kind { kAddress, kService, kPid } kind = Kind::kAddress;
  std::string address;  // kAddress
  std::string service;  // kService
  int pid = 0;          // kPid
};
absl::StatusOr<ControlSpec> ParseControlSpec(absl::string_view flag_value);

// The workers a spec names, resolved through the registry: an address is
// itself (pid 0); "all:NAME" with no live worker is NotFound naming the
// service and what was ignored. `ignored` (may be null) gets the lines.
// Only entries `trust` believes, listening where they say (CheckListener),
// are returned (an address is the user's own choice).
absl::StatusOr<std::vector<Entry>> Resolve(const ControlSpec& spec, const Trust& trust,
                                           std::vector<Ignored>* ignored);

// "pid 1234 at 127.0.0.1:41234", or the address alone for pid 0.
std::string WorkerName(const Entry& e);

}  // namespace registry
}  // namespace rsslab

#endif  // RSSLAB_REGISTRY_REGISTRY_H_
