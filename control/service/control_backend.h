// What the Control service calls: phases, trims and snapshots of one
// process, with requests already checked (request_check.h, run by
// ControlCalls before it dispatches). The one implementation is ControlOps
// (control/ops/control_ops.h), which rsslab_server and the Python package
// host.
//
// Example:
//   ControlOps ops(&my_host, options);  // a ControlBackend
//   ControlService service(&ops, /*max_watch_streams=*/8, &security);

#ifndef RSSLAB_CONTROL_SERVICE_CONTROL_BACKEND_H_
#define RSSLAB_CONTROL_SERVICE_CONTROL_BACKEND_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
#include "control/service/request_check.h"
#include "proto/snapshot.pb.h"

namespace rsslab {

struct ControlSnapshotOptions {
  bool gc = false;
  bool detail = false;
  // The Python section (and the gc) is waited for at most this long: a
  // handler holding the GIL in a long C call must not stop the rest of the
  // snapshot (procfs, smaps, allocator, census, workers), which needs no
  // Python. Past it, python.unavailable says why.
  absl::Duration python_deadline = absl::Seconds(2);
  // False: no Python section at all (the /metrics scrape uses none).
  bool python = true;
};

// The Python parts of a call get at most half the caller's time left, and
// `cap` at most (10 ms at least): the rest still answers within the deadline.
inline absl::Duration PythonDeadline(absl::Time call_deadline, absl::Duration cap) {
  const absl::Duration half = (call_deadline - absl::Now()) / 2;
  return std::max(absl::Milliseconds(10), std::min(cap, half));
}

class ControlBackend {
 public:
  virtual ~ControlBackend() = default;
  // The largest cache_limit_bytes SetPhase accepts (CheckSetPhase's).
  virtual CacheCeiling cache_ceiling() const = 0;
  // Calls checked by CheckSetPhase/CheckTrim; an error status is the RPC's
  // answer. `python_deadline`: how long the parts that need Python (gc,
  // releasing evicted cache entries) and each worker's share of a trim may
  // wait, as for a snapshot; the rest does not wait for it.
  virtual absl::Status SetPhase(const SetPhaseCall& call, rsslab::v1::SetPhaseResponse* response,
                                absl::Duration python_deadline) = 0;
  virtual absl::Status Trim(const TrimCall& call, rsslab::v1::TrimResponse* response,
                            absl::Duration python_deadline) = 0;
  virtual void TakeSnapshot(const ControlSnapshotOptions& options,
                            rsslab::v1::Snapshot* out) = 0;
};

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_SERVICE_CONTROL_BACKEND_H_
