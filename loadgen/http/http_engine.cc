#include "loadgen/http/http_engine.h"

#include <curl/curl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/echo.h"
#include "loadgen/results/histogram.h"
#include "loadgen/step_counts.h"

namespace rsslab {
namespace http {
namespace {

using ::rsslab::v1::LoadSpec;

int64_t MonoNs() { return StepMonoNs(); }

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

// A request's outcome slot: an HTTP status (100-599) or, past them, the kind
// of transfer failure.
enum Kind { kTimeout, kConnect, kBadResponse, kClosed, kTooLarge, kRedirects, kOther, kKinds };
constexpr const char* kKindNames[kKinds] = {"TIMEOUT",   "CONNECT",   "BAD_RESPONSE", "CLOSED",
                                            "TOO_LARGE", "REDIRECTS", "OTHER"};
constexpr int kHttpCodes = 600;
constexpr int kOutcomes = kHttpCodes + kKinds;

std::string OutcomeName(int o) {
  return o < kHttpCodes ? absl::StrCat(o) : kKindNames[o - kHttpCodes];
}

// Per thread; only Progress() and TakeInterval() contend for it.
struct Shard {
  absl::Mutex mu;
  Histogram hist ABSL_GUARDED_BY(mu);
  Histogram interval ABSL_GUARDED_BY(mu);
  std::array<uint64_t, kOutcomes> outcomes ABSL_GUARDED_BY(mu) = {};
  uint64_t req_bytes ABSL_GUARDED_BY(mu) = 0;
  uint64_t resp_bytes ABSL_GUARDED_BY(mu) = 0;
};


void InitCurlOnce() {
  static const bool kInit = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)kInit;
}

}  // namespace

struct HttpEngine::RunState : StepCounts {
  const Target* target = nullptr;
  int max_receive_mb = kDefaultMaxReceiveMb;
  bool open_loop = false;
  std::vector<std::unique_ptr<Shard>> shards;

  // One finished request into its thread's shard and the step's counts;
  // `error` gives its text when it is the step's first failure. Returns its
  // end time.
  int64_t Record(int shard, bool warm, int64_t intended_ns, int outcome, uint64_t req_bytes,
                 uint64_t resp_bytes, absl::FunctionRef<std::string()> error) {
    const int64_t end = MonoNs();
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

  Histogram Merged() {
    Histogram h;
    for (auto& s : shards) {
      absl::MutexLock l(&s->mu);
      h.Merge(s->hist);
    }
    return h;
  }
};

namespace {

using RunState = HttpEngine::RunState;

// One request slot: its curl handle (kept, so its connection is reused),
// the request built into reused buffers, and what came back.
struct Slot {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  Request req;
  bool warm = false;
  int64_t intended_ns = 0;
  uint64_t body_bytes = 0, header_bytes = 0, max_body = 0;
  bool body_over = false, headers_over = false;
  bool in_multi = false;
  bool opens = false;  // h2c: opens its own connection with prior knowledge
  bool refused = false;  // h2c: wanted a new connection without prior knowledge
  int* sockets = nullptr;  // the worker's open sockets (h2c)
  int* opens_pending = nullptr;  // its opening requests without a socket yet
  char errbuf[CURL_ERROR_SIZE] = {};
  ~Slot() {
    if (easy != nullptr) curl_easy_cleanup(easy);
    curl_slist_free_all(headers);
  }
};

// h2c's connection count: every socket curl opens and closes.
curl_socket_t OnOpenSocket(void* ud, curlsocktype, curl_sockaddr* a) {
  Slot* s = static_cast<Slot*>(ud);
  if (!s->opens) {
    // Plain HTTP/2 would open it with an HTTP/1.1 Upgrade: the request is
    // sent again to open it with prior knowledge (Worker::Complete).
    s->refused = true;
    return CURL_SOCKET_BAD;
  }
  const curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  if (fd == CURL_SOCKET_BAD) return fd;
  ++*s->sockets;
  if (s->opens) {
    s->opens = false;  // its connection exists now
    --*s->opens_pending;
  }
  return fd;
}

int OnCloseSocket(void* ud, curl_socket_t fd) {
  --*static_cast<int*>(ud);
  return close(fd);
}

size_t OnBody(char*, size_t size, size_t n, void* ud) {
  Slot* s = static_cast<Slot*>(ud);
  s->body_bytes += size * n;
  if (s->body_bytes > s->max_body) {
    s->body_over = true;
    return 0;  // curl fails the transfer (CURLE_WRITE_ERROR)
  }
  return size * n;
}

size_t OnHeader(char*, size_t size, size_t n, void* ud) {
  Slot* s = static_cast<Slot*>(ud);
  s->header_bytes += size * n;
  if (s->header_bytes > kMaxResponseHeaderBytes) {
    s->headers_over = true;
    return 0;
  }
  return size * n;
}

// Why a transfer failed: its kind, and its text for the step's first error.
int Classify(CURLcode rc, const Slot& s) {
  if (s.body_over || s.headers_over) return kHttpCodes + kTooLarge;
  switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
      return kHttpCodes + kTimeout;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      return kHttpCodes + kConnect;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_BAD_CONTENT_ENCODING:
      return kHttpCodes + kBadResponse;
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      return kHttpCodes + kClosed;
    case CURLE_TOO_MANY_REDIRECTS:
      return kHttpCodes + kRedirects;
    default:
      return kHttpCodes + kOther;
  }
}

std::string ErrorText(int outcome, CURLcode rc, const Slot& s, const LoadSpec& spec,
                      int max_receive_mb) {
  const std::string what = absl::StrCat(*s.req.method, " ", Echo(s.req.url, 200));
  if (outcome < kHttpCodes) {
    return absl::StrFormat("HTTP %d from %s%s", outcome, what,
                           outcome >= 300 && outcome < 400
                               ? " (a redirect: not followed without --follow_redirects)"
                               : "");
  }
  const std::string detail = s.errbuf[0] != '\0' ? s.errbuf : curl_easy_strerror(rc);
  std::string why;
  switch (outcome - kHttpCodes) {
    case kTooLarge:
      why = s.body_over ? absl::StrFormat("a response body over --max_receive_mb=%d (raise it "
                                          "to accept larger responses)",
                                          max_receive_mb)
                        : absl::StrFormat("response headers over %d KiB",
                                          kMaxResponseHeaderBytes >> 10);
      break;
    case kTimeout:
      why = absl::StrFormat("no whole response within --deadline_ms=%d (%s)", spec.deadline_ms(),
                            Echo(detail, 200));
      break;
    case kBadResponse:
      why = absl::StrCat("not an HTTP response (", Echo(detail, 200), ")");
      break;
    case kClosed:
      why = absl::StrCat("the peer closed the connection mid-response (", Echo(detail, 200), ")");
      break;
    default:
      why = Echo(detail, 200);
  }
  return absl::StrCat(kKindNames[outcome - kHttpCodes], ": ", what, ": ", why);
}

// One thread: a curl multi handle, its connections and request slots.
class Worker {
 public:
  Worker(RunState* st, int index, int threads, int conns, int slots)
      : st_(st), index_(index), threads_(threads), slots_cap_(slots), conns_(conns) {
    multi_ = curl_multi_init();
    h2_ = st_->target->version() == Version::kH2c;
    const bool h2 = h2_;
    curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(conns));
    curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, static_cast<long>(conns));
    curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(conns));
    curl_multi_setopt(multi_, CURLMOPT_PIPELINING, h2 ? CURLPIPE_MULTIPLEX : CURLPIPE_NOTHING);
    if (h2) {
      // Streams per connection, so the requests in flight spread over all.
      const long per_conn = std::max(1L, static_cast<long>((slots + conns - 1) / conns));
      curl_multi_setopt(multi_, CURLMOPT_MAX_CONCURRENT_STREAMS, per_conn);
    }
  }
  ~Worker() {
    for (auto& s : all_) {
      if (s->in_multi) curl_multi_remove_handle(multi_, s->easy);
    }
    all_.clear();
    curl_multi_cleanup(multi_);
  }

  void Loop(const StopFlag* stop, int64_t t0, Sends* sends);

 private:
  Slot* NewSlot();
  void SetRequest(Slot* s, uint64_t idx);
  bool Issue(Slot* s, int64_t intended);
  void Complete(CURLMsg* msg);
  void SendDue(Sends* sends);
  void Advance();
  void ChooseConnection(Slot* s);

  RunState* st_;
  int index_, threads_, slots_cap_, conns_;
  bool h2_ = false;
  bool added_ = false;  // a request was added since the last perform
  // h2c: the connections open now (curl's socket callbacks count them), and
  // requests sent to open one that have no socket yet.
  int sockets_ = 0;
  int opens_pending_ = 0;
  CURLM* multi_ = nullptr;
  std::vector<std::unique_ptr<Slot>> all_;
  std::vector<Slot*> free_;
  int active_ = 0;
  // Open loop: this thread's share of the schedule.
  uint64_t sent_ = 0;
  int64_t t0_ = 0;
  int64_t next_intended_ = 0;
  double offset_s_ = 0;
  bool schedule_done_ = false;
  std::mt19937_64 rng_;
};

Slot* Worker::NewSlot() {
  auto s = std::make_unique<Slot>();
  CURL* e = curl_easy_init();
  s->easy = e;
  s->max_body = static_cast<uint64_t>(MaxReceiveBytes(st_->max_receive_mb));
  curl_easy_setopt(e, CURLOPT_PRIVATE, s.get());
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, s.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, s.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(st_->spec.deadline_ms()));
  curl_easy_setopt(e, CURLOPT_USERAGENT, "rsslab_loadgen");
  // Straight to the target: no proxy from http_proxy & co. (which would
  // measure the proxy), and no environment lookups per request.
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  if (!h2_) curl_easy_setopt(e, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
  if (h2_) {
    s->sockets = &sockets_;
    s->opens_pending = &opens_pending_;
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, OnOpenSocket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, s.get());
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, OnCloseSocket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, &sockets_);
  }
  if (st_->target->follow_redirects()) {
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http");
  }
  if (st_->target->fixed()) SetRequest(s.get(), 0);
  all_.push_back(std::move(s));
  return all_.back().get();
}

// Request `idx` onto the slot's handle; curl copies the URL, the body and
// headers stay in the slot (POSTFIELDS is not copied).
void Worker::SetRequest(Slot* s, uint64_t idx) {
  st_->target->Build(idx, st_->spec.seed(), &s->req);
  CURL* e = s->easy;
  curl_easy_setopt(e, CURLOPT_URL, s->req.url.c_str());
  const std::string& m = *s->req.method;
  curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, nullptr);
  curl_easy_setopt(e, CURLOPT_NOBODY, 0L);  // a HEAD line before may have set it
  if (m == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (s->req.has_body) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(s->req.body.size()));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, s->req.body.data());
    if (m != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m.c_str());
  } else {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    if (m != "GET") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m.c_str());
  }
  curl_slist_free_all(s->headers);
  s->headers = nullptr;
  for (const std::string& h : s->req.headers) s->headers = curl_slist_append(s->headers, h.c_str());
  // No "Expect: 100-continue" round trip for large bodies.
  s->headers = curl_slist_append(s->headers, "Expect:");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->headers);
}

bool Worker::Issue(Slot* s, int64_t intended) {
  uint64_t idx = 0;
  bool warm = false;
  if (!st_->Take(intended, &idx, &warm)) return false;
  if (!st_->target->fixed()) SetRequest(s, idx);
  if (h2_) ChooseConnection(s);
  s->warm = warm;
  s->intended_ns = intended;
  s->body_bytes = s->header_bytes = 0;
  s->body_over = s->headers_over = false;
  s->errbuf[0] = '\0';
  curl_multi_add_handle(multi_, s->easy);
  s->in_multi = true;
  ++active_;
  added_ = true;
  return true;
}

// h2c. libcurl 7.88 (Debian 12) fails a prior-knowledge request sent on a
// reused connection ("Error in the HTTP2 framing layer": it switches the
// connection to HTTP/2 a second time; curl issue 10634, fixed in 8.0). So
// while fewer than the worker's connections are open (or being opened), a
// request opens a fresh one with prior knowledge; the others go as plain
// HTTP/2, which takes an existing HTTP/2 connection as it is, waiting for one
// (PIPEWAIT). A connection the server closed is so reopened with prior
// knowledge by a later request.
void Worker::ChooseConnection(Slot* s) {
  s->opens = s->refused || sockets_ + opens_pending_ < conns_;
  s->refused = false;
  if (s->opens) ++opens_pending_;
  curl_easy_setopt(s->easy, CURLOPT_HTTP_VERSION,
                   s->opens ? CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE : CURL_HTTP_VERSION_2_0);
  curl_easy_setopt(s->easy, CURLOPT_FRESH_CONNECT, s->opens ? 1L : 0L);
  curl_easy_setopt(s->easy, CURLOPT_PIPEWAIT, s->opens ? 0L : 1L);
}

void Worker::Complete(CURLMsg* msg) {
  Slot* s = nullptr;
  curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &s);
  const CURLcode rc = msg->data.result;
  curl_multi_remove_handle(multi_, s->easy);
  s->in_multi = false;
  --active_;
  if (s->refused) {
    // Never reached the server: the same request again, opening the
    // connection (its latency still runs from its intended time).
    if (s->opens) --opens_pending_;
    ChooseConnection(s);
    s->body_bytes = s->header_bytes = 0;
    s->errbuf[0] = '\0';
    curl_multi_add_handle(multi_, s->easy);
    s->in_multi = true;
    ++active_;
    return;
  }
  long status = 0;
  curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
  // A connection that failed to open is opened again by a later request.
  // An opening request that failed before it had a socket: a later one
  // opens the connection.
  if (s->opens) {
    s->opens = false;
    --opens_pending_;
  }
  const int outcome = rc == CURLE_OK && status >= 100 && status < kHttpCodes
                          ? static_cast<int>(status)
                          : Classify(rc == CURLE_OK ? CURLE_WEIRD_SERVER_REPLY : rc, *s);
  const int64_t end = st_->Record(
      index_, s->warm, s->intended_ns, outcome, s->req.has_body ? s->req.body.size() : 0,
      s->body_bytes,
      [&] { return ErrorText(outcome, rc, *s, st_->spec, st_->max_receive_mb); });
  // Closed loop: the slot goes straight back out.
  if (st_->open_loop || !Issue(s, end)) free_.push_back(s);
}

void Worker::Advance() {
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

// Open loop: sends what is due (or marks the schedule done).
void Worker::SendDue(Sends* sends) {
  while (!schedule_done_) {
    if (st_->stopping.load() || next_intended_ >= st_->measure_end_ns) {
      schedule_done_ = true;
      return;
    }
    const int64_t now = MonoNs();
    if (now < next_intended_) return;
    if (now >= st_->measure_end_ns) {
      // Due before the end but not sent when time was up.
      const double rate = st_->spec.rate() / threads_;
      const double due = std::ceil((st_->measure_end_ns - next_intended_) / 1e9 * rate);
      sends->not_sent += due > 0 ? static_cast<uint64_t>(due) : 0;
      schedule_done_ = true;
      return;
    }
    if (active_ >= slots_cap_) return;  // held back: late when it leaves
    const int64_t lag = now - next_intended_;
    if (lag > 1000000) ++sends->late;
    sends->max_lag_ns = std::max(sends->max_lag_ns, lag);
    Slot* s = free_.empty() ? NewSlot() : free_.back();
    if (!free_.empty()) free_.pop_back();
    if (!Issue(s, next_intended_)) {
      free_.push_back(s);
      schedule_done_ = true;
      return;
    }
    Advance();
  }
}

void Worker::Loop(const StopFlag* stop, int64_t t0, Sends* sends) {
  t0_ = t0;
  if (st_->open_loop) {
    rng_.seed(st_->spec.seed() + index_);
    offset_s_ = st_->spec.arrival() == "poisson" ? 0 : index_ / st_->spec.rate();
    next_intended_ = t0_ + static_cast<int64_t>(offset_s_ * 1e9);
  } else {
    for (int i = 0; i < slots_cap_; ++i) {
      Slot* s = NewSlot();
      if (!Issue(s, MonoNs())) {
        free_.push_back(s);
        break;
      }
    }
  }
  while (true) {
    int running = 0;
    curl_multi_perform(multi_, &running);
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg == CURLMSG_DONE) Complete(m);
    }
    if (stop != nullptr && stop->stopped() && !sends->interrupted) {
      sends->interrupted = true;
      st_->stopping = true;
    }
    if (st_->open_loop) SendDue(sends);
    if (active_ == 0 && (!st_->open_loop || schedule_done_)) return;
    // Requests just added start at once, without a poll first.
    if (added_) {
      added_ = false;
      continue;
    }
    int timeout_ms = 50;
    if (st_->open_loop && !schedule_done_ && active_ < slots_cap_) {
      const int64_t wait = next_intended_ - MonoNs();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait / 1000000, 0, 50));
    }
    curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
  }
}

// The server accepts connections (retried until `timeout`, as gRPC's
// WaitForConnected waits for a server still starting).
absl::Status WaitConnectable(const Target& t, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  std::string last;
  do {
    CURL* e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, t.base().c_str());
    curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     std::max(1L, static_cast<long>(absl::ToInt64Milliseconds(until - absl::Now()))));
    const CURLcode rc = curl_easy_perform(e);
    curl_easy_cleanup(e);
    if (rc == CURLE_OK) return absl::OkStatus();
    last = curl_easy_strerror(rc);
    absl::SleepFor(absl::Milliseconds(100));
  } while (absl::Now() < until);
  return absl::UnavailableError(absl::StrFormat("cannot connect to the server at %s within %s (%s)",
                                                t.base(), absl::FormatDuration(timeout), last));
}

int AllowedCpus() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0
             ? CPU_COUNT(&set)
             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// n split over k parts: part i's share.
int Share(int n, int k, int i) { return n / k + (i < n % k ? 1 : 0); }

}  // namespace

HttpEngine::HttpEngine(Options options) : options_(std::move(options)) {
  InitCurlOnce();
  // As LoadEngine: Debian's absl checks every Mutex for deadlock cycles,
  // bookkeeping a visible share of a request's CPU here; the engine's locks
  // do not nest.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}
HttpEngine::~HttpEngine() = default;

LiveProgress HttpEngine::Progress() const {
  std::shared_ptr<RunState> st;
  {
    absl::MutexLock l(&mu_);
    st = current_;
  }
  if (st == nullptr) return LiveProgress();
  return st->Progress(st->Merged());
}

rsslab::v1::Latency HttpEngine::TakeInterval() {
  std::shared_ptr<RunState> st;
  {
    absl::MutexLock l(&mu_);
    st = current_;
  }
  if (st == nullptr) return {};
  Histogram h;
  for (auto& s : st->shards) {
    absl::MutexLock l(&s->mu);
    h.Merge(s->interval);
    s->interval.Reset();
  }
  return h.LatencyMicros();
}

namespace {

// The step's figures into result->summary, and its status.
void Summarize(RunState* st, double cpu, const Sends& sends, LoadResult* result) {
  auto& sum = result->summary;
  Histogram tail;
  std::array<uint64_t, kOutcomes> outcomes = {};
  uint64_t req_bytes = 0, resp_bytes = 0;
  for (auto& sh : st->shards) {
    absl::MutexLock l(&sh->mu);
    tail.Merge(sh->interval);
    sh->interval.Reset();
    for (int o = 0; o < kOutcomes; ++o) outcomes[o] += sh->outcomes[o];
    req_bytes += sh->req_bytes;
    resp_bytes += sh->resp_bytes;
  }
  if (tail.count() > 0) result->tail_interval = tail.LatencyMicros();
  sum.set_call(st->target->describe());
  sum.set_request_bytes(req_bytes);
  sum.set_response_bytes(resp_bytes);
  for (int o = 0; o < kOutcomes; ++o) {
    if (outcomes[o] > 0) (*sum.mutable_status_counts())[OutcomeName(o)] = outcomes[o];
  }
  st->Summarize(st->Merged(), cpu, sends, "requests", result);
}

}  // namespace

LoadResult HttpEngine::Run(const LoadSpec& spec, const std::string& step, const StopFlag* stop) {
  LoadResult result;
  auto& sum = result.summary;
  sum.set_step(step);
  sum.set_mode(spec.rate() > 0 ? "open" : "closed");
  sum.set_concurrency(spec.concurrency());
  sum.set_channels(spec.channels());
  sum.set_target_rate(spec.rate());
  sum.set_start_unix_nanos(absl::ToUnixNanos(absl::Now()));
  if (absl::Status s = WaitConnectable(*options_.target, options_.connect_timeout); !s.ok()) {
    result.status = s;
    sum.set_first_error(std::string(s.message()));
    sum.set_end_unix_nanos(absl::ToUnixNanos(absl::Now()));
    return result;
  }
  auto st = std::make_shared<RunState>();
  st->spec = spec;
  st->target = options_.target.get();
  st->max_errors = options_.max_errors;
  st->max_receive_mb = options_.max_receive_mb;
  st->metrics = options_.metrics;
  st->open_loop = spec.rate() > 0;
  const int conns = std::max<int>(1, spec.channels());
  const int slots = st->open_loop ? std::max<int>(1, spec.max_outstanding())
                                  : std::max<int>(1, spec.concurrency());
  int threads = options_.client_threads > 0 ? options_.client_threads
                                            : std::min(conns, AllowedCpus());
  threads = std::max(1, std::min({threads, conns, slots}));
  for (int i = 0; i < threads; ++i) st->shards.push_back(std::make_unique<Shard>());
  {
    absl::MutexLock l(&mu_);
    current_ = st;
  }
  const double cpu0 = CpuSeconds();
  const int64_t t0 = MonoNs();
  st->warmup_end_ns = t0 + static_cast<int64_t>(spec.warmup_s() * 1e9);
  if (spec.duration_s() > 0) {
    st->measure_end_ns = st->warmup_end_ns + static_cast<int64_t>(spec.duration_s() * 1e9);
  }
  std::vector<Sends> sends(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      Worker w(st.get(), i, threads, Share(conns, threads, i), Share(slots, threads, i));
      w.Loop(stop, t0, &sends[i]);
    });
  }
  for (auto& t : pool) t.join();
  Sends all;
  for (const Sends& s : sends) {
    all.late += s.late;
    all.not_sent += s.not_sent;
    all.max_lag_ns = std::max(all.max_lag_ns, s.max_lag_ns);
    all.interrupted = all.interrupted || s.interrupted;
  }
  const double cpu = CpuSeconds() - cpu0;
  {
    absl::MutexLock l(&mu_);
    current_.reset();
  }
  Summarize(st.get(), cpu, all, &result);
  return result;
}

}  // namespace http
}  // namespace rsslab
