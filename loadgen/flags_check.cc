#include "loadgen/flags_check.h"

#include <cmath>

#include "absl/strings/str_format.h"
#include "common/units.h"
#include "loadgen/status_code.h"

namespace rsslab {

void CheckLoadBounds(const rsslab::v1::LoadSpec& s, const AddError& add) {
  auto need = [&](absl::string_view field, const absl::Status& st) {
    if (!st.ok()) add(field, std::string(st.message()));
  };
  if (s.rate() != 0) need("rate", CheckRange(s.rate(), "rate", kMinRate, kMaxRate, " per second"));
  // A count at a rate is a time: it must fit the maximum run time.
  if (s.rate() >= kMinRate && s.requests() > 0 &&
      static_cast<double>(s.requests()) / s.rate() > kMaxRunTimeS) {
    add("requests", absl::StrFormat("%u requests at %g per second take %.3g s, more than the "
                                    "maximum run time of %.0f s (30 days)",
                                    s.requests(), s.rate(),
                                    static_cast<double>(s.requests()) / s.rate(), kMaxRunTimeS));
  }
  need("concurrency", CheckRange(s.concurrency(), "concurrency", 0, kMaxConcurrency));
  need("channels", CheckRange(s.channels(), "channels", 0, kMaxChannels));
  need("max_outstanding",
       CheckRange(s.max_outstanding(), "max_outstanding", 0, kMaxOutstandingLimit));
  need("requests", CheckRange(s.requests(), "requests", 0, kMaxRequests));
  need("warmup_requests", CheckRange(s.warmup_requests(), "warmup_requests", 0, kMaxRequests));
  if (s.duration_s() != 0) {
    need("duration_s", CheckRange(s.duration_s(), "duration_s", 0.0, kMaxDurationS, " s"));
  }
  if (s.warmup_s() != 0) {
    need("warmup_s", CheckRange(s.warmup_s(), "warmup_s", 0.0, kMaxDurationS, " s"));
  }
  need("deadline_ms", CheckRange(s.deadline_ms(), "deadline_ms", 0, kMaxDeadlineMs, " ms"));
  need("payload_bytes",
       CheckRange(s.payload_bytes(), "payload_bytes", 0, kMaxPayloadBytes, " bytes"));
  if (s.scale() != 0) need("scale", CheckRange(s.scale(), "scale", 0.0, kMaxScale));
  need("stream_messages",
       CheckRange(s.stream_messages(), "stream_messages", 0, kMaxStreamMessages));
  if (s.stream_interval_ms() != 0) {
    need("stream_interval_ms", CheckRange(s.stream_interval_ms(), "stream_interval_ms", 0.0,
                                          kMaxStreamIntervalMs, " ms"));
  }
  const double streams = s.concurrency() > 0 ? s.concurrency() : s.max_outstanding();
  if (streams * s.stream_messages() > kMaxStreamMessagesInFlight) {
    add("stream_messages",
        absl::StrFormat("%u messages per stream x %g streams in flight is more than %g messages",
                        s.stream_messages(), streams, kMaxStreamMessagesInFlight));
  }
}

absl::Status CheckProcessFlags(const ProcessFlags& f) {
  for (const absl::Status& s : {
           CheckRange(f.client_threads, "--client_threads", 0, 1024),
           CheckRange(f.max_receive_mb, "--max_receive_mb", 1, kMaxReceiveMbLimit, " (MiB)"),
           CheckDuration(f.connect_timeout, "--connect_timeout", absl::Milliseconds(1),
                         absl::Hours(1)),
           CheckDuration(f.control_timeout, "--control_timeout", absl::Milliseconds(1),
                         absl::Hours(24)),
           CheckDuration(f.metrics_hold, "--metrics_hold", absl::ZeroDuration(), absl::Hours(24)),
           CheckRange(f.repeats, "--repeats", 0, 1000),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace rsslab
