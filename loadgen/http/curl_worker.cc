#include "loadgen/http/curl_worker.h"

#include <curl/curl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace rsslab {
namespace http {
namespace {

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
  // Opens a slot (or takes a free one) for request `intended` of the open loop.
  bool IssueScheduled(int64_t intended);

 private:
  Slot* NewSlot();
  void SetRequest(Slot* s, uint64_t idx);
  bool Issue(Slot* s, int64_t intended);
  void Complete(CURLMsg* msg);
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
  Schedule schedule_;  // open loop
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
      [&] {
        return ErrorText(*st_, outcome, *s->req.method, s->req.url,
                         s->errbuf[0] != '\0' ? s->errbuf : curl_easy_strerror(rc), s->body_over);
      });
  // Closed loop: the slot goes straight back out.
  if (st_->open_loop || !Issue(s, end)) free_.push_back(s);
}

bool Worker::IssueScheduled(int64_t intended) {
  Slot* s = free_.empty() ? NewSlot() : free_.back();
  if (!free_.empty()) free_.pop_back();
  if (Issue(s, intended)) return true;
  free_.push_back(s);
  return false;
}

void Worker::Loop(const StopFlag* stop, int64_t t0, Sends* sends) {
  if (st_->open_loop) {
    schedule_.Start(st_, index_, threads_, t0);
  } else {
    for (int i = 0; i < slots_cap_; ++i) {
      Slot* s = NewSlot();
      if (!Issue(s, StepMonoNs())) {
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
    if (st_->open_loop) {
      schedule_.SendDue(active_, slots_cap_, sends, [&](int64_t t) { return IssueScheduled(t); });
    }
    if (active_ == 0 && (!st_->open_loop || schedule_.done())) return;
    // Requests just added start at once, without a poll first.
    if (added_) {
      added_ = false;
      continue;
    }
    int timeout_ms = 50;
    if (st_->open_loop && !schedule_.done() && active_ < slots_cap_) {
      const int64_t wait = schedule_.next_ns() - StepMonoNs();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait / 1000000, 0, 50));
    }
    curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
  }
}

// The server accepts connections (retried until `timeout`, as gRPC's
// WaitForConnected waits for a server still starting).
}  // namespace

void InitCurl() {
  static const bool kInit = [] { return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }();
  (void)kInit;
}

void RunCurlWorker(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends) {
  Worker w(st, a.index, a.threads, a.conns, a.slots);
  w.Loop(stop, a.t0, sends);
}

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

}  // namespace http
}  // namespace rsslab
