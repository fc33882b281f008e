#include "loadgen/http/http_run.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/untrusted_text.h"

namespace rsslab {
namespace http {
namespace {

constexpr const char* kKindNames[kKinds] = {"TIMEOUT",   "CONNECT",   "BAD_RESPONSE", "CLOSED",
                                            "TOO_LARGE", "REDIRECTS", "OTHER"};

}  // namespace

std::string OutcomeName(int o) {
  return o < kHttpCodes ? absl::StrCat(o) : kKindNames[o - kHttpCodes];
}

int64_t RunState::Record(int shard, bool warm, int64_t intended_ns, int outcome,
                         uint64_t req_bytes, uint64_t resp_bytes,
                         absl::FunctionRef<std::string()> error) {
  const int64_t end = StepMonoNs();
  const uint64_t lat = static_cast<uint64_t>(std::max<int64_t>(0, end - intended_ns));
  const bool ok = outcome >= 200 && outcome < 300;
  if (!warm) {
    Shard& s = *shards[shard];
    absl::MutexLock l(&s.mu);
    s.hist.Record(lat);
    s.interval.Record(lat);
    s.outcomes[outcome]++;
    s.req_bytes += req_bytes;
    s.resp_bytes += resp_bytes;
  }
  Finish(ok, warm, end, error);
  if (metrics != nullptr) metrics->OnDone(ok ? 0 : 2, absl::Nanoseconds(lat), warm);
  return end;
}

Histogram RunState::Merged() {
  Histogram h;
  for (auto& s : shards) {
    absl::MutexLock l(&s->mu);
    h.Merge(s->hist);
  }
  return h;
}

std::string ErrorText(const RunState& st, int outcome, absl::string_view method,
                      absl::string_view url, absl::string_view detail, bool body_over) {
  const std::string what = absl::StrCat(method, " ", Echo(url, 200));
  if (outcome < kHttpCodes) {
    return absl::StrFormat("HTTP %d from %s%s", outcome, what,
                           outcome >= 300 && outcome < 400 && !st.target->follow_redirects()
                               ? " (a redirect: not followed without --follow_redirects)"
                               : "");
  }
  std::string why;
  switch (outcome - kHttpCodes) {
    case kTooLarge:
      why = body_over ? absl::StrFormat("a response body over --max_receive_mb=%d (raise it "
                                        "to accept larger responses)",
                                        st.max_receive_mb)
                      : absl::StrFormat("response headers over %d KiB",
                                        kMaxResponseHeaderBytes >> 10);
      break;
    case kTimeout:
      why = absl::StrFormat("no whole response within --deadline_ms=%d (%s)",
                            st.spec.deadline_ms(), Echo(detail, 200));
      break;
    case kBadResponse:
      why = absl::StrCat("not an HTTP response (", Echo(detail, 200), ")");
      break;
    case kClosed:
      why = absl::StrCat("the peer closed the connection mid-response (", Echo(detail, 200), ")");
      break;
    case kRedirects:
      why = absl::StrCat("redirects not followed to the end (", Echo(detail, 200), ")");
      break;
    default:
      why = Echo(detail, 200);
  }
  return absl::StrCat(OutcomeName(outcome), ": ", what, ": ", why);
}

bool SameServerPath(const Target& t, absl::string_view loc, absl::string_view* path) {
  const std::string& base = t.base();
  if (absl::StartsWith(loc, base) && (loc.size() == base.size() || loc[base.size()] == '/')) {
    loc.remove_prefix(base.size());
    if (loc.empty()) loc = "/";
  }
  if (loc.empty() || loc[0] != '/' || absl::StartsWith(loc, "//")) return false;
  *path = loc;
  return true;
}

bool HasHeader(const Request& r, absl::string_view name) {
  for (const std::string& h : r.headers) {
    if (h.size() > name.size() && h[name.size()] == ':' && absl::StartsWithIgnoreCase(h, name)) {
      return true;
    }
  }
  return false;
}

absl::string_view Authority(const Target& t) {
  return absl::string_view(t.base()).substr(sizeof("http://") - 1);
}

void Schedule::Start(const RunState* st, int index, int threads, int64_t t0) {
  st_ = st;
  index_ = index;
  threads_ = threads;
  t0_ = t0;
  rng_.seed(st->spec.seed() + index);
  offset_s_ = st->spec.arrival() == "poisson" ? 0 : index / st->spec.rate();
  next_intended_ = t0 + static_cast<int64_t>(offset_s_ * 1e9);
}

void Schedule::Advance() {
  ++sent_;
  const double rate = st_->spec.rate() / threads_;
  if (st_->spec.arrival() == "poisson") {
    offset_s_ += std::exponential_distribution<double>(rate)(rng_);
  } else {
    // This thread sends requests index_, index_ + threads, ... of the
    // whole schedule: constant arrivals overall.
    offset_s_ = (static_cast<double>(sent_) * threads_ + index_) / st_->spec.rate();
  }
  next_intended_ = t0_ + static_cast<int64_t>(offset_s_ * 1e9);
}

void Schedule::SendDue(int active, int cap, Sends* sends, absl::FunctionRef<bool(int64_t)> issue) {
  while (!done_) {
    if (st_->stopping.load() || next_intended_ >= st_->measure_end_ns) {
      done_ = true;
      return;
    }
    const int64_t now = StepMonoNs();
    if (now < next_intended_) return;
    if (now >= st_->measure_end_ns) {
      // Due before the end but not sent when time was up.
      const double rate = st_->spec.rate() / threads_;
      const double due = std::ceil((st_->measure_end_ns - next_intended_) / 1e9 * rate);
      sends->not_sent += due > 0 ? static_cast<uint64_t>(due) : 0;
      done_ = true;
      return;
    }
    if (active >= cap) return;  // held back: late when it leaves
    const int64_t lag = now - next_intended_;
    if (lag > 1000000) ++sends->late;
    sends->max_lag_ns = std::max(sends->max_lag_ns, lag);
    if (!issue(next_intended_)) {
      done_ = true;
      return;
    }
    ++active;
    Advance();
  }
}

}  // namespace http
}  // namespace rsslab
