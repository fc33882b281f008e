// What the Control service calls: phases, trims and snapshots of one
// process. rsslab_server's ServerCore is one backend; the Python package's
// in-process service (rsslab.serve()) is another.
//
// Example:
//   class MyBackend : public ControlBackend { ... };
//   MyBackend backend;
//   ControlService service(&backend, /*max_watch_streams=*/8, &security);

#ifndef RSSLAB_CONTROL_SERVICE_CONTROL_BACKEND_H_
#define RSSLAB_CONTROL_SERVICE_CONTROL_BACKEND_H_

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/control.pb.h"
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

// A trim mode the proto does not name (a newer or a hostile client) is
// refused, not treated as the default; `field` names it in the message.
inline absl::Status CheckTrimMode(int mode, absl::string_view field) {
  if (!rsslab::v1::TrimMode_IsValid(mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " must be 0 (default), 1 (global only), 2 (per thread) or 3 (free-block purge); got ",
        mode));
  }
  return absl::OkStatus();
}

// The Python parts of a call get at most half the caller's time left, and
// `cap` at most (10 ms at least): the rest still answers within the deadline.
inline absl::Duration PythonDeadline(absl::Time call_deadline, absl::Duration cap) {
  const absl::Duration half = (call_deadline - absl::Now()) / 2;
  return std::max(absl::Milliseconds(10), std::min(cap, half));
}

class ControlBackend {
 public:
  virtual ~ControlBackend() = default;
  // Each validates its request; an error status is the RPC's answer.
  // `python_deadline`: how long the parts that need Python (gc, releasing
  // evicted cache entries) may wait for the GIL, as for a snapshot; the
  // rest does not wait for it.
  virtual absl::Status SetPhase(const rsslab::v1::SetPhaseRequest& request,
                                rsslab::v1::SetPhaseResponse* response,
                                absl::Duration python_deadline) = 0;
  virtual absl::Status Trim(const rsslab::v1::TrimRequest& request,
                            rsslab::v1::TrimResponse* response,
                            absl::Duration python_deadline) = 0;
  virtual void TakeSnapshot(const ControlSnapshotOptions& options,
                            rsslab::v1::Snapshot* out) = 0;
};

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_SERVICE_CONTROL_BACKEND_H_
