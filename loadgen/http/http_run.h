// What both HTTP engines (HTTP/1.1 on Boost.Beast: h1_worker.h; h2c on
// nghttp2: h2_worker.h) share for one load step: the outcome kinds, the
// per-thread histogram shards, recording a finished request, the error texts
// and the open loop's schedule.
//
//   RunState st;  // spec, target, shards set up by HttpEngine::Run
//   Schedule sched;
//   sched.Start(st, /*index=*/0, /*threads=*/1, t0);
//   sched.SendDue(active, cap, &sends, [&](int64_t intended) { return Issue(intended); });
//   ...  // on a response:
//   st.Record(0, warm, intended, /*outcome=*/200, req_bytes, resp_bytes, [&] { return text; });
#ifndef RSSLAB_LOADGEN_HTTP_HTTP_RUN_H_
#define RSSLAB_LOADGEN_HTTP_HTTP_RUN_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "loadgen/engine.h"
#include "loadgen/http/http_target.h"
#include "loadgen/results/histogram.h"
#include "loadgen/step_counts.h"

namespace rsslab {
namespace http {

// Response headers larger than this fail the request (TOO_LARGE).
inline constexpr size_t kMaxResponseHeaderBytes = 64 << 10;
// Redirects followed for one request (--follow_redirects) before REDIRECTS.
inline constexpr int kMaxRedirects = 5;

// A request's outcome slot: an HTTP status (100-599) or, past them, the kind
// of transfer failure.
enum Kind { kTimeout, kConnect, kBadResponse, kClosed, kTooLarge, kRedirects, kOther, kKinds };
inline constexpr int kHttpCodes = 600;
inline constexpr int kOutcomes = kHttpCodes + kKinds;
inline constexpr int Failed(Kind k) { return kHttpCodes + k; }

std::string OutcomeName(int outcome);

// Per thread; only Progress() and TakeInterval() contend for it.
struct Shard {
  absl::Mutex mu;
  Histogram hist ABSL_GUARDED_BY(mu);
  Histogram interval ABSL_GUARDED_BY(mu);
  std::array<uint64_t, kOutcomes> outcomes ABSL_GUARDED_BY(mu) = {};
  uint64_t req_bytes ABSL_GUARDED_BY(mu) = 0;
  uint64_t resp_bytes ABSL_GUARDED_BY(mu) = 0;
};

struct RunState : StepCounts {
  const Target* target = nullptr;
  int max_receive_mb = kDefaultMaxReceiveMb;
  bool open_loop = false;
  std::vector<std::unique_ptr<Shard>> shards;

  // One finished request into its thread's shard and the step's counts;
  // `error` gives its text when it is the step's first failure. Returns its
  // end time.
  int64_t Record(int shard, bool warm, int64_t intended_ns, int outcome, uint64_t req_bytes,
                 uint64_t resp_bytes, absl::FunctionRef<std::string()> error);
  Histogram Merged();
};

// A failed request's text: "KIND: METHOD URL: why (detail)", or for an HTTP
// status "HTTP 404 from METHOD URL". `body_over`: a TOO_LARGE body (else
// headers).
std::string ErrorText(const RunState& st, int outcome, absl::string_view method,
                      absl::string_view url, absl::string_view detail, bool body_over);

// --follow_redirects: the path on the target's own server that `location`
// names (a path, or the target's http://HOST:PORT and a path), or false
// when it names another server (not followed: REDIRECTS).
bool SameServerPath(const Target& t, absl::string_view location, absl::string_view* path);

// The template gave a header `name` (case-insensitive).
bool HasHeader(const Request& r, absl::string_view name);

// HOST:PORT of the target (Host, :authority).
absl::string_view Authority(const Target& t);

// One worker thread's arguments.
struct WorkerArgs {
  int index = 0;    // its shard
  int threads = 1;  // all workers
  int conns = 1;    // its connections
  int slots = 1;    // its requests in flight (queued for a connection included)
  int64_t t0 = 0;   // the step's start (MonoNs)
};

// A request taken for the step, waiting for a connection.
struct Pending {
  uint64_t idx = 0;
  bool warm = false;
  int64_t intended = 0;
};

// Requests waiting for a connection, FIFO; never more than the worker's
// slots, so a ring of that size, allocated once.
class PendingRing {
 public:
  explicit PendingRing(int cap) : ring_(std::max(1, cap)) {}
  bool empty() const { return size_ == 0; }
  void Push(const Pending& p) {
    ring_[(head_ + size_) % ring_.size()] = p;
    ++size_;
  }
  Pending Pop() {
    const Pending p = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --size_;
    return p;
  }

 private:
  std::vector<Pending> ring_;
  size_t head_ = 0, size_ = 0;
};

// Open loop: this thread's share of the schedule (requests index, index +
// threads, ... of a constant one; its own Poisson process at rate/threads).
class Schedule {
 public:
  void Start(const RunState* st, int index, int threads, int64_t t0);
  // Sends what is due through `issue(intended_ns)` (false: the step wants no
  // more) while fewer than `cap` are active, or marks the schedule done.
  void SendDue(int active, int cap, Sends* sends, absl::FunctionRef<bool(int64_t)> issue);
  bool done() const { return done_; }
  int64_t next_ns() const { return next_intended_; }

 private:
  void Advance();

  const RunState* st_ = nullptr;
  int index_ = 0, threads_ = 1;
  uint64_t sent_ = 0;
  int64_t t0_ = 0;
  int64_t next_intended_ = 0;
  double offset_s_ = 0;
  bool done_ = false;
  std::mt19937_64 rng_;
};

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_HTTP_RUN_H_
