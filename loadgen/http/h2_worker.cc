#include "loadgen/http/h2_worker.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/untrusted_text.h"
#include "loadgen/http/worker_loop.h"

namespace rsslab {
namespace http {
namespace {

namespace net = boost::asio;
using boost::system::error_code;
using tcp = net::ip::tcp;

constexpr size_t kReadChunk = 64 << 10;
constexpr int32_t kStreamWindow = 16 << 20;  // so a large body does not wait on window updates

struct Conn;

// One request in flight (a slot, reused): its headers as nghttp2 takes them.
struct Stream {
  Request req;
  Pending p;
  std::vector<std::string> names, values;  // template headers, names lower-case
  std::vector<nghttp2_nv> nva;
  std::string path, length, location;
  std::string method;  // a redirect's GET
  size_t body_off = 0;
  bool send_body = false;
  bool redirected = false;  // the headers are a redirect's
  Conn* conn = nullptr;  // in flight on it
  int32_t id = 0;
  int64_t deadline_ns = 0;
  int status = 0, hops = 0;
  uint64_t body_bytes = 0, header_bytes = 0;
  bool body_over = false, headers_over = false, timed_out = false, retried = false;
};

struct Conn {
  explicit Conn(net::io_context& io) : sock(io), rbuf(kReadChunk) {}
  tcp::socket sock;
  nghttp2_session* session = nullptr;
  std::vector<uint8_t> rbuf;
  std::string out;
  bool writing = false, open = false, goaway = false, got_frames = false;
  int streams = 0;
  class H2Worker* worker = nullptr;
};

nghttp2_nv Nv(const std::string& n, const std::string& v) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
          NGHTTP2_NV_FLAG_NONE};
}

class H2Worker : public WorkerLoop {
 public:
  H2Worker(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends);
  ~H2Worker() override;

  // nghttp2's callbacks.
  void OnHeader(Stream* s, absl::string_view name, absl::string_view value, int32_t id,
                nghttp2_session* session);
  void OnData(Stream* s, size_t len, int32_t id, nghttp2_session* session);
  void OnStreamClose(Conn* c, Stream* s, uint32_t error_code);

 private:
  void Dispatch() override;
  void CheckDeadlines(int64_t now) override;
  void CloseAll() override;
  Conn* PickConn();
  void Open(Conn* c);
  void Submit(Stream* s, Conn* c);
  void BuildHeaders(Stream* s, absl::string_view path, absl::string_view method, bool body);
  void Flush(Conn* c);
  void FlushAll();
  void Read(Conn* c);
  void ConnFail(Conn* c, int outcome, absl::string_view detail);
  void Complete(Stream* s, int outcome, absl::string_view detail);

  const uint64_t max_body_;
  const int per_conn_;
  std::string authority_;
  tcp::resolver::results_type endpoints_;
  error_code resolve_ec_;
  nghttp2_session_callbacks* callbacks_ = nullptr;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<Stream*> free_;
  std::vector<Stream*> retry_;  // refused by a connection's GOAWAY: sent again
  // Inside nghttp2 (its callbacks may submit, not send or delete a session).
  int nested_ = 0;
  bool dirty_ = false;  // submitted while nested: flush after
};

int OnHeaderCb(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
               size_t namelen, const uint8_t* value, size_t valuelen, uint8_t, void* ud) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  auto* s = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
  if (s == nullptr) return 0;
  static_cast<Conn*>(ud)->worker->OnHeader(
      s, absl::string_view(reinterpret_cast<const char*>(name), namelen),
      absl::string_view(reinterpret_cast<const char*>(value), valuelen), frame->hd.stream_id,
      session);
  return 0;
}

int OnDataCb(nghttp2_session* session, uint8_t, int32_t id, const uint8_t*, size_t len,
             void* ud) {
  auto* s = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, id));
  if (s != nullptr) static_cast<Conn*>(ud)->worker->OnData(s, len, id, session);
  return 0;
}

int OnFrameCb(nghttp2_session*, const nghttp2_frame* frame, void* ud) {
  auto* c = static_cast<Conn*>(ud);
  c->got_frames = true;
  if (frame->hd.type == NGHTTP2_GOAWAY) c->goaway = true;
  return 0;
}

int OnCloseCb(nghttp2_session* session, int32_t id, uint32_t error_code, void* ud) {
  auto* s = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, id));
  if (s != nullptr) static_cast<Conn*>(ud)->worker->OnStreamClose(static_cast<Conn*>(ud), s, error_code);
  return 0;
}

ssize_t ReadBodyCb(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                   nghttp2_data_source* source, void*) {
  auto* s = static_cast<Stream*>(source->ptr);
  const size_t n = std::min(length, s->req.body.size() - s->body_off);
  memcpy(buf, s->req.body.data() + s->body_off, n);
  s->body_off += n;
  if (s->body_off == s->req.body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
  return static_cast<ssize_t>(n);
}

H2Worker::H2Worker(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends)
    : WorkerLoop(st, a, stop, sends),
      max_body_(static_cast<uint64_t>(MaxReceiveBytes(st->max_receive_mb))),
      per_conn_(std::max(1, (a.slots + a.conns - 1) / a.conns)),
      authority_(Authority(*st->target)) {
  tcp::resolver resolver(io_);
  endpoints_ = resolver.resolve(st->target->host(), std::to_string(st->target->port()),
                                resolve_ec_);
  nghttp2_session_callbacks_new(&callbacks_);
  nghttp2_session_callbacks_set_on_header_callback(callbacks_, OnHeaderCb);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks_, OnDataCb);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks_, OnFrameCb);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks_, OnCloseCb);
  for (int i = 0; i < a.conns; ++i) {
    conns_.push_back(std::make_unique<Conn>(io_));
    conns_.back()->worker = this;
  }
  for (int i = 0; i < a.slots; ++i) {
    streams_.push_back(std::make_unique<Stream>());
    Stream* s = streams_.back().get();
    if (st->target->fixed()) {
      st->target->Build(0, st->spec.seed(), &s->req);
      BuildHeaders(s, absl::string_view(s->req.url).substr(st->target->base().size()),
                   *s->req.method, s->req.has_body);
    }
    free_.push_back(s);
  }
}

H2Worker::~H2Worker() {
  CloseAll();
  nghttp2_session_callbacks_del(callbacks_);
}

void H2Worker::BuildHeaders(Stream* s, absl::string_view path, absl::string_view method,
                            bool body) {
  static const std::string kMethod = ":method", kScheme = ":scheme", kHttp = "http",
                           kAuthority = ":authority", kPath = ":path", kAgent = "user-agent",
                           kAgentValue = "rsslab_loadgen", kAccept = "accept", kAny = "*/*",
                           kType = "content-type", kForm = "application/x-www-form-urlencoded",
                           kLength = "content-length";
  s->method.assign(method.data(), method.size());
  s->path.assign(path.empty() ? "/" : path.data(), path.empty() ? 1 : path.size());
  s->send_body = body;
  s->names.clear();
  s->values.clear();
  for (const std::string& h : s->req.headers) {
    const size_t colon = h.find(':');
    s->names.push_back(absl::AsciiStrToLower(absl::string_view(h).substr(0, colon)));
    s->values.emplace_back(absl::StripLeadingAsciiWhitespace(absl::string_view(h).substr(colon + 1)));
  }
  s->nva.clear();
  s->nva.push_back(Nv(kMethod, s->method));
  s->nva.push_back(Nv(kScheme, kHttp));
  s->nva.push_back(Nv(kAuthority, authority_));
  s->nva.push_back(Nv(kPath, s->path));
  s->nva.push_back(Nv(kAgent, kAgentValue));
  s->nva.push_back(Nv(kAccept, kAny));
  for (size_t i = 0; i < s->names.size(); ++i) s->nva.push_back(Nv(s->names[i], s->values[i]));
  if (body) {
    if (!HasHeader(s->req, "Content-Type")) s->nva.push_back(Nv(kType, kForm));
    s->length = std::to_string(s->req.body.size());
    s->nva.push_back(Nv(kLength, s->length));
  }
}

// The connection with the fewest streams that can take one more (opening
// it if it is closed).
Conn* H2Worker::PickConn() {
  Conn* best = nullptr;
  for (auto& c : conns_) {
    if (c->goaway || c->streams >= per_conn_) continue;
    if (best == nullptr || c->streams < best->streams) best = c.get();
  }
  if (best != nullptr && best->session == nullptr) Open(best);
  return best;
}

void H2Worker::Dispatch() {
  while (!retry_.empty()) {
    Conn* c = PickConn();
    if (c == nullptr) return;
    Stream* s = retry_.back();
    retry_.pop_back();
    Submit(s, c);
  }
  while (!pending().empty()) {
    Conn* c = PickConn();
    if (c == nullptr) return;
    Stream* s = free_.back();
    free_.pop_back();
    s->p = pending().Pop();
    s->deadline_ns = Deadline(s->p.intended);
    s->hops = 0;
    s->retried = false;
    const Target& t = *st_->target;
    if (!t.fixed() || s->redirected) {
      s->redirected = false;
      if (!t.fixed()) t.Build(s->p.idx, st_->spec.seed(), &s->req);
      BuildHeaders(s, absl::string_view(s->req.url).substr(t.base().size()), *s->req.method,
                   s->req.has_body);
    }
    Submit(s, c);
  }
  FlushAll();
}

void H2Worker::FlushAll() {
  if (nested_ > 0) {
    dirty_ = true;
    return;
  }
  dirty_ = false;
  for (auto& c : conns_) Flush(c.get());
}

void H2Worker::Submit(Stream* s, Conn* c) {
  s->status = 0;
  s->body_bytes = s->header_bytes = 0;
  s->body_off = 0;
  s->body_over = s->headers_over = s->timed_out = false;
  s->location.clear();
  nghttp2_data_provider body;
  body.source.ptr = s;
  body.read_callback = ReadBodyCb;
  const int32_t id = nghttp2_submit_request(c->session, nullptr, s->nva.data(), s->nva.size(),
                                            s->send_body ? &body : nullptr, s);
  if (id < 0) {
    s->conn = nullptr;
    Complete(s, Failed(kOther), nghttp2_strerror(id));
    return;
  }
  s->id = id;
  s->conn = c;
  ++c->streams;
}

// A new session with prior knowledge; requests submitted before the socket
// connects leave when it does.
void H2Worker::Open(Conn* c) {
  nghttp2_session_client_new(&c->session, callbacks_, c);
  const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                       {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kStreamWindow}};
  nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 2);
  nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0, 1 << 30);
  c->goaway = c->got_frames = false;
  if (resolve_ec_) {
    net::post(io_, [this, c] { ConnFail(c, Failed(kConnect), resolve_ec_.message()); });
    return;
  }
  net::async_connect(c->sock, endpoints_, [this, c](const error_code& ec, const tcp::endpoint&) {
    if (c->session == nullptr) return;  // failed meanwhile
    if (ec) {
      ConnFail(c, Failed(kConnect), ec.message());
      return;
    }
    error_code ignored;
    c->sock.set_option(tcp::no_delay(true), ignored);
    c->open = true;
    Flush(c);
    Read(c);
  });
}

void H2Worker::Flush(Conn* c) {
  if (!c->open || c->writing || c->session == nullptr) return;
  while (true) {
    const uint8_t* data = nullptr;
    ++nested_;
    const ssize_t n = nghttp2_session_mem_send(c->session, &data);
    --nested_;
    if (n < 0) {
      ConnFail(c, Failed(kOther), nghttp2_strerror(static_cast<int>(n)));
      return;
    }
    if (n == 0) break;
    c->out.append(reinterpret_cast<const char*>(data), n);
    if (c->session == nullptr) return;
  }
  if (dirty_) FlushAll();
  if (c->out.empty()) {
    // Ended by the server and drained: a new connection takes its place.
    if (c->streams == 0 && (c->goaway || !nghttp2_session_want_read(c->session))) {
      ConnFail(c, Failed(kClosed), "ended by the server");
    }
    return;
  }
  c->writing = true;
  net::async_write(c->sock, net::buffer(c->out), [this, c](const error_code& ec, size_t) {
    c->writing = false;
    c->out.clear();
    if (c->session == nullptr) return;
    if (ec) {
      ConnFail(c, Failed(kClosed), ec.message());
      return;
    }
    Flush(c);
  });
}

void H2Worker::Read(Conn* c) {
  c->sock.async_read_some(net::buffer(c->rbuf), [this, c](const error_code& ec, size_t n) {
    if (c->session == nullptr) return;
    if (ec) {
      ConnFail(c, c->got_frames ? Failed(kClosed) : Failed(kBadResponse),
               ec == net::error::eof ? "the server closed the connection" : ec.message());
      return;
    }
    ++nested_;
    const ssize_t rv = nghttp2_session_mem_recv(c->session, c->rbuf.data(), n);
    --nested_;
    if (rv < 0) {
      ConnFail(c, Failed(kBadResponse), nghttp2_strerror(static_cast<int>(rv)));
      return;
    }
    Dispatch();  // slots freed by the responses read, sent
    FlushAll();
    if (c->session != nullptr) Read(c);
  });
}

// The connection is gone: its streams fail by `outcome` (TIMEOUT for those
// past their deadline), and it reopens for the next request.
void H2Worker::ConnFail(Conn* c, int outcome, absl::string_view detail) {
  if (c->session == nullptr) return;
  nghttp2_session* session = c->session;
  c->session = nullptr;
  error_code ignored;
  c->sock.close(ignored);
  c->open = false;
  c->goaway = false;
  c->writing = false;
  c->out.clear();
  c->streams = 0;
  for (auto& s : streams_) {
    if (s->conn != c) continue;
    s->conn = nullptr;
    Complete(s.get(), s->timed_out ? Failed(kTimeout) : outcome, detail);
  }
  nghttp2_session_del(session);
  // Requests waiting for it (refused by its GOAWAY) go on a new one.
  net::post(io_, [this] { Dispatch(); });
}

void H2Worker::OnHeader(Stream* s, absl::string_view name, absl::string_view value, int32_t id,
                        nghttp2_session* session) {
  s->header_bytes += name.size() + value.size() + 32;
  if (s->header_bytes > kMaxResponseHeaderBytes && !s->headers_over) {
    s->headers_over = true;
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  } else if (name == ":status") {
    (void)absl::SimpleAtoi(value, &s->status);
  } else if (name == "location") {
    s->location.assign(value.data(), value.size());
  }
}

void H2Worker::OnData(Stream* s, size_t len, int32_t id, nghttp2_session* session) {
  s->body_bytes += len;
  if (s->body_bytes > max_body_ && !s->body_over) {
    s->body_over = true;
    nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  }
}

void H2Worker::OnStreamClose(Conn* c, Stream* s, uint32_t error_code) {
  if (s->conn != c) return;
  s->conn = nullptr;
  --c->streams;
  if (error_code == NGHTTP2_REFUSED_STREAM && !s->retried && !s->timed_out) {
    s->retried = true;  // above a GOAWAY's last stream: never processed
    retry_.push_back(s);
    return;
  }
  int outcome = s->status;
  std::string detail = "status";
  if (s->timed_out) {
    outcome = Failed(kTimeout);
    detail = s->status != 0 ? "response incomplete" : "no response";
  } else if (s->headers_over || s->body_over) {
    outcome = Failed(kTooLarge);
  } else if (error_code != NGHTTP2_NO_ERROR) {
    outcome = error_code == NGHTTP2_REFUSED_STREAM || error_code == NGHTTP2_CANCEL
                  ? Failed(kClosed)
                  : Failed(kBadResponse);
    detail = nghttp2_http2_strerror(error_code);
  } else if (outcome < 100 || outcome >= kHttpCodes) {
    outcome = Failed(kBadResponse);
  } else if (outcome >= 300 && outcome < 400 && st_->target->follow_redirects()) {
    absl::string_view path;
    if (++s->hops > kMaxRedirects) {
      outcome = Failed(kRedirects);
      detail = absl::StrCat("more than ", kMaxRedirects, " redirects");
    } else if (!SameServerPath(*st_->target, s->location, &path)) {
      outcome = Failed(kRedirects);
      detail = absl::StrCat("a ", s->status, " to '", Echo(s->location, 100),
                            "': followed on the same server only");
    } else {
      const bool get = outcome == 303 || ((outcome == 301 || outcome == 302) && s->method == "POST");
      BuildHeaders(s, path, get ? "GET" : s->method, !get && s->send_body);
      s->redirected = true;
      retry_.push_back(s);
      return;
    }
  }
  Complete(s, outcome, detail);
}

void H2Worker::Complete(Stream* s, int outcome, absl::string_view detail) {
  const int64_t end = st_->Record(
      a_.index, s->p.warm, s->p.intended, outcome, s->req.has_body ? s->req.body.size() : 0,
      s->body_bytes, [&] {
        return ErrorText(*st_, outcome, *s->req.method, s->req.url, detail, s->body_over);
      });
  free_.push_back(s);
  Finished(end);
}

// Past --deadline_ms: the stream reset (TIMEOUT when it closes); a
// connection not open by then fails its streams.
void H2Worker::CheckDeadlines(int64_t now) {
  for (auto& s : streams_) {
    Conn* c = s->conn;
    if (c == nullptr || s->timed_out || now <= s->deadline_ns) continue;
    s->timed_out = true;
    if (!c->open) {
      ConnFail(c, Failed(kTimeout), "connect");
    } else {
      nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    }
  }
  for (auto& c : conns_) Flush(c.get());
}

void H2Worker::CloseAll() {
  if (nested_ > 0) {  // not inside nghttp2: once it returns
    net::post(io_, [this] { CloseAll(); });
    return;
  }
  for (auto& c : conns_) {
    if (c->session == nullptr) continue;
    nghttp2_session_del(c->session);
    c->session = nullptr;
    error_code ignored;
    c->sock.close(ignored);
    c->open = false;
  }
}

}  // namespace

void RunH2Worker(RunState* st, const WorkerArgs& args, const StopFlag* stop, Sends* sends) {
  H2Worker w(st, args, stop, sends);
  w.Run();
}

}  // namespace http
}  // namespace rsslab
