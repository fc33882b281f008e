#include "control/service/control_calls.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace rsslab {

namespace {

ControlSnapshotOptions WatchOptions(const rsslab::v1::WatchRequest& request) {
  ControlSnapshotOptions o;
  o.gc = request.gc();
  o.detail = request.detail();
  return o;
}

template <typename Message>
absl::Status Parse(absl::string_view bytes, absl::string_view type, Message* out) {
  if (!out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return ControlCalls::UnparsedRequest(type);
  }
  return absl::OkStatus();
}

// Parses `request` as In, answers with `fn(in, &out)`, serializes Out.
template <typename In, typename Out, typename Fn>
absl::Status Serialized(absl::string_view request, absl::string_view type, std::string* response,
                        Fn fn) {
  In in;
  if (absl::Status p = Parse(request, type, &in); !p.ok()) return p;
  Out out;
  if (absl::Status s = fn(in, &out); !s.ok()) return s;
  out.SerializeToString(response);
  return absl::OkStatus();
}

}  // namespace

ControlCalls::Watch::Watch(ControlCalls* calls, const rsslab::v1::WatchRequest& request,
                           int64_t interval_ms)
    : calls_(calls),
      options_(WatchOptions(request)),
      max_count_(request.max_count()),
      interval_(absl::Milliseconds(interval_ms)),
      next_(absl::Now()) {}

ControlCalls::Watch::~Watch() { calls_->watch_streams_.fetch_sub(1); }

bool ControlCalls::Watch::Next(rsslab::v1::Snapshot* out,
                               const std::function<bool()>& cancelled) {
  auto ended = [&] {
    return cancelled_.load() || calls_->stopping_.load() || (cancelled && cancelled());
  };
  if (max_count_ > 0 && sent_ >= max_count_) return false;
  // Sleep in short steps so a gone client or a shutdown ends the stream
  // promptly.
  while (!ended() && absl::Now() < next_) {
    absl::SleepFor(std::min(absl::Milliseconds(50), next_ - absl::Now()));
  }
  if (ended()) return false;
  calls_->backend_->TakeSnapshot(options_, out);
  ++sent_;
  next_ += interval_;
  return true;
}

absl::Status ControlCalls::UnparsedRequest(absl::string_view type) {
  if (type == "SetPhaseRequest") {
    return absl::InvalidArgumentError(
        "the request does not parse as rsslab.v1.SetPhaseRequest: the phase is not valid UTF-8, "
        "or the bytes are not a SetPhaseRequest");
  }
  return absl::InvalidArgumentError(absl::StrCat("the request does not parse as rsslab.v1.", type));
}

// Each request is checked here, once, before the backend sees it.
absl::Status ControlCalls::SetPhase(const rsslab::v1::SetPhaseRequest& request,
                                    absl::Time call_deadline,
                                    rsslab::v1::SetPhaseResponse* response) {
  absl::StatusOr<SetPhaseCall> call = CheckSetPhase(request, backend_->cache_ceiling());
  if (!call.ok()) return call.status();
  return backend_->SetPhase(
      *call, response, PythonDeadline(call_deadline, ControlSnapshotOptions().python_deadline));
}

void ControlCalls::GetSnapshot(const rsslab::v1::SnapshotRequest& request,
                               absl::Time call_deadline, rsslab::v1::Snapshot* response) {
  ControlSnapshotOptions o;
  o.gc = request.gc();
  o.detail = request.detail();
  o.python_deadline = PythonDeadline(call_deadline, o.python_deadline);
  backend_->TakeSnapshot(o, response);
}

absl::Status ControlCalls::Trim(const rsslab::v1::TrimRequest& request, absl::Time call_deadline,
                                rsslab::v1::TrimResponse* response) {
  absl::StatusOr<TrimCall> call = CheckTrim(request);
  if (!call.ok()) return call.status();
  return backend_->Trim(*call, response,
                        PythonDeadline(call_deadline, ControlSnapshotOptions().python_deadline));
}

absl::StatusOr<std::unique_ptr<ControlCalls::Watch>> ControlCalls::OpenWatch(
    const rsslab::v1::WatchRequest& request) {
  const int64_t interval_ms = request.interval_ms() == 0 ? 1000 : request.interval_ms();
  if (interval_ms < 10 || interval_ms > 24 * 3600 * 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interval_ms must be between 10 and 86400000 (a day); got ", request.interval_ms()));
  }
  if (watch_streams_.fetch_add(1) >= max_watch_streams_) {
    watch_streams_.fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "too many WatchSnapshots streams (limit ", max_watch_streams_, ", ", limit_source_, ")"));
  }
  // The slot taken above is given back by ~Watch.
  return std::unique_ptr<Watch>(new Watch(this, request, interval_ms));
}

absl::Status ControlCalls::CallSerialized(absl::string_view method, absl::string_view request,
                                          absl::Time call_deadline, std::string* response) {
  if (method == "GetSnapshot") {
    return Serialized<rsslab::v1::SnapshotRequest, rsslab::v1::Snapshot>(
        request, "SnapshotRequest", response, [&](const auto& in, auto* out) {
          GetSnapshot(in, call_deadline, out);
          return absl::OkStatus();
        });
  }
  if (method == "SetPhase") {
    return Serialized<rsslab::v1::SetPhaseRequest, rsslab::v1::SetPhaseResponse>(
        request, "SetPhaseRequest", response,
        [&](const auto& in, auto* out) { return SetPhase(in, call_deadline, out); });
  }
  if (method == "Trim") {
    return Serialized<rsslab::v1::TrimRequest, rsslab::v1::TrimResponse>(
        request, "TrimRequest", response,
        [&](const auto& in, auto* out) { return Trim(in, call_deadline, out); });
  }
  return absl::UnimplementedError(
      absl::StrCat("rsslab.v1.Control has no unary method '", method.substr(0, 64), "'"));
}

absl::StatusOr<std::unique_ptr<ControlCalls::Watch>> ControlCalls::OpenWatchSerialized(
    absl::string_view request) {
  rsslab::v1::WatchRequest in;
  if (absl::Status p = Parse(request, "WatchRequest", &in); !p.ok()) return p;
  return OpenWatch(in);
}

}  // namespace rsslab
