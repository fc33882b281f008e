// Range checks for the loadgen's numbers, applied to every layer of load
// settings (the command line's flags, a scenario's load_defaults and each
// load step) before anything is created or sent, so a nonsense value is a
// usage error (exit 2) with the allowed range, never a run directory and
// an exit 1 later (--channels=100000, --rate=1e12, a 4 GB
// payload_bytes).
//
//   CheckLoadBounds(spec, [&](absl::string_view field, const std::string& what) {
//     errors.push_back(absl::StrCat(field, ": ", what));
//   });

#ifndef RSSLAB_LOADGEN_FLAGS_CHECK_H_
#define RSSLAB_LOADGEN_FLAGS_CHECK_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/scenario.pb.h"

namespace rsslab {

// What one loadgen process can sensibly do; docs/RELIABILITY.md lists them.
inline constexpr int64_t kMaxChannels = 1024;
inline constexpr int64_t kMaxConcurrency = 100000;
inline constexpr int64_t kMaxOutstandingLimit = 1000000;
inline constexpr double kMaxRate = 1e7;                  // requests per second
// Slowest open loop: one request per 100 s. Below it the schedule's
// interval overflowed once (--rate=1e-10 sent 46,415 requests flat out).
inline constexpr double kMinRate = 0.01;
inline constexpr int64_t kMaxPayloadBytes = 16ll << 20;  // the server's default max message
inline constexpr int64_t kMaxDeadlineMs = 3600000;       // 1 h
inline constexpr int64_t kMaxRequests = int64_t{1} << 40;
// A whole run's requests, every repeat multiplied out (CheckPlanBounds).
inline constexpr int64_t kMaxPlanRequests = kMaxRequests;
inline constexpr double kMaxDurationS = 30 * 86400.0;  // 30 days (a soak)
// The longest a whole run may be planned to take, from every bound the
// scenario gives (wait seconds, load durations, requests / rate, repeat
// counts times their steps): checked before anything is sent.
inline constexpr double kMaxRunTimeS = kMaxDurationS;
// repeat inside repeat at most this deep (the text parser stops well
// before the stack could: a 5,000-deep scenario once crashed the loadgen).
inline constexpr int kMaxRepeatDepth = 16;
inline constexpr double kMaxScale = 1e6;
// A streaming call's request messages per stream, the pause between two,
// and the messages all streams in flight may hold (a bidi stream keeps each
// message's send time until its reply: 8 bytes each).
inline constexpr int64_t kMaxStreamMessages = 1000000;
inline constexpr double kMaxStreamIntervalMs = 60000;
inline constexpr double kMaxStreamMessagesInFlight = 1e8;
inline constexpr int64_t kMaxCacheLimitMb = int64_t{1} << 30;  // common/units kMaxMiB

using AddError = std::function<void(absl::string_view field, const std::string& what)>;

// Each set field of one layer within its range (0 = unset, as elsewhere).
void CheckLoadBounds(const rsslab::v1::LoadSpec& spec, const AddError& add);

// The process flags that are not a load layer (client threads, the reply
// bound, timeouts,
// a sweep's repeats, --metrics_hold); the first error, or OK.
struct ProcessFlags {
  int client_threads = 0;
  int max_receive_mb = 0;
  absl::Duration connect_timeout;
  absl::Duration control_timeout;
  absl::Duration metrics_hold;
  int repeats = 0;
};
absl::Status CheckProcessFlags(const ProcessFlags& f);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_FLAGS_CHECK_H_
