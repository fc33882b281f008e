// The rules of rsslab.v1.Control's four methods, apart from any transport:
// what each one validates, how long Python may be waited for, and the
// watch streams' interval, count and limit. ControlService (gRPC C++, in
// rsslab_server and in the Python package's native transport) and the
// package's grpcio transport (rsslab.serve() in a process that already
// runs grpcio) both answer through it, so the two cannot drift apart.
//
// Example:
//   auto calls = std::make_shared<ControlCalls>(&backend, /*max_watch_streams=*/8);
//   std::string out;
//   absl::Status s = calls->CallSerialized("GetSnapshot", request_bytes,
//                                          absl::InfiniteFuture(), &out);
//   absl::StatusOr<std::unique_ptr<ControlCalls::Watch>> w = calls->OpenWatch(request);
//   rsslab::v1::Snapshot snap;
//   while (w.ok() && (*w)->Next(&snap, [&] { return client_gone; })) Send(snap);

#ifndef RSSLAB_CONTROL_SERVICE_CONTROL_CALLS_H_
#define RSSLAB_CONTROL_SERVICE_CONTROL_CALLS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "control/service/control_backend.h"
#include "proto/control.pb.h"
#include "proto/snapshot.pb.h"

namespace rsslab {

class ControlCalls {
 public:
  // One WatchSnapshots stream. It holds one of the `max_watch_streams`
  // slots until destroyed; the ControlCalls must outlive it.
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

    // Waits until the next snapshot is due (the first is due at once) and
    // takes it. False, with `out` untouched, once max_count were taken, or
    // when Cancel() was called, `cancelled` (may be empty) returns true, or
    // StopWatches() ran; checked every 50 ms while waiting, so a gone client
    // or a shutdown ends the stream promptly.
    bool Next(rsslab::v1::Snapshot* out, const std::function<bool()>& cancelled = nullptr);
    // Any thread: ends the stream at its next check.
    void Cancel() { cancelled_.store(true); }

   private:
    friend class ControlCalls;
    Watch(ControlCalls* calls, const rsslab::v1::WatchRequest& request, int64_t interval_ms);

    ControlCalls* const calls_;
    const ControlSnapshotOptions options_;
    const uint32_t max_count_;
    const absl::Duration interval_;
    uint32_t sent_ = 0;
    absl::Time next_;
    std::atomic<bool> cancelled_{false};
  };

  // `limit_source` names what sets `max_watch_streams` in the refusal's
  // sentence (the server's flag; the package's limit is fixed).
  ControlCalls(ControlBackend* backend, int max_watch_streams,
               std::string limit_source = "--max_watch_streams")
      : backend_(backend),
        max_watch_streams_(max_watch_streams),
        limit_source_(std::move(limit_source)) {}

  // `call_deadline`: when the caller stops waiting (absl::InfiniteFuture()
  // for none); the Python parts get at most half of what is left.
  absl::Status SetPhase(const rsslab::v1::SetPhaseRequest& request, absl::Time call_deadline,
                        rsslab::v1::SetPhaseResponse* response);
  void GetSnapshot(const rsslab::v1::SnapshotRequest& request, absl::Time call_deadline,
                   rsslab::v1::Snapshot* response);
  absl::Status Trim(const rsslab::v1::TrimRequest& request, absl::Time call_deadline,
                    rsslab::v1::TrimResponse* response);
  // INVALID_ARGUMENT for an interval outside 10 ms..1 day, RESOURCE_EXHAUSTED
  // when every slot is taken.
  absl::StatusOr<std::unique_ptr<Watch>> OpenWatch(const rsslab::v1::WatchRequest& request);

  // For a transport that hands over bytes: `method` is SetPhase,
  // GetSnapshot or Trim; `request` is parsed as its request type (a request
  // that does not parse is INVALID_ARGUMENT with UnparsedRequest's
  // sentence), `response` gets the answer serialized.
  absl::Status CallSerialized(absl::string_view method, absl::string_view request,
                              absl::Time call_deadline, std::string* response);
  absl::StatusOr<std::unique_ptr<Watch>> OpenWatchSerialized(absl::string_view request);

  // INVALID_ARGUMENT naming the type (e.g. "SetPhaseRequest") a request
  // did not parse as.
  static absl::Status UnparsedRequest(absl::string_view type);

  // Ends every watch stream at its next check, and any opened later at its
  // first (shutdown).
  void StopWatches() { stopping_.store(true); }

 private:
  ControlBackend* const backend_;
  const int max_watch_streams_;
  const std::string limit_source_;
  std::atomic<int> watch_streams_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rsslab

#endif  // RSSLAB_CONTROL_SERVICE_CONTROL_CALLS_H_
