#include "loadgen/http/h1_worker.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/untrusted_text.h"
#include "loadgen/http/worker_loop.h"

namespace rsslab {
namespace http {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;
using tcp = net::ip::tcp;
using BeastView = boost::beast::string_view;

constexpr size_t kReadChunk = 16 << 10;

// A response parsed and counted, nothing stored: its status, its body's
// size and its Location (for --follow_redirects). Beast's parser bounds the
// header (header_limit) and the body (body_limit).
class CountingParser : public bhttp::basic_parser<false> {
 public:
  explicit CountingParser(std::string* location) : location_(location) {}
  int status = 0;
  uint64_t body_bytes = 0;

 private:
  void on_request_impl(bhttp::verb, BeastView, BeastView, int, error_code&) override {}
  void on_response_impl(int code, BeastView, int, error_code&) override { status = code; }
  void on_field_impl(bhttp::field name, BeastView, BeastView value, error_code&) override {
    if (name == bhttp::field::location) location_->assign(value.data(), value.size());
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<uint64_t>&, error_code&) override {}
  size_t on_body_impl(BeastView body, error_code&) override {
    body_bytes += body.size();
    return body.size();
  }
  void on_chunk_header_impl(uint64_t, BeastView, error_code&) override {}
  size_t on_chunk_body_impl(uint64_t, BeastView body, error_code&) override {
    body_bytes += body.size();
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  std::string* location_;
};

// One keep-alive connection and the request it carries.
struct Conn {
  explicit Conn(net::io_context& io) : sock(io) {}
  tcp::socket sock;
  boost::beast::flat_buffer buf;  // kept across responses: no allocation once grown
  std::optional<CountingParser> parser;  // emplaced per response, in place
  Request req;
  std::string wire;  // the request's bytes, rebuilt only when it changes
  std::string location;
  bool wire_redirected = false;  // `wire` holds a redirect's request
  bool open = false;
  bool busy = false;     // carries a request
  bool served = false;   // answered a request before: the server may have closed it idle
  bool retried = false;  // this request was sent again on a new connection
  bool timed_out = false;
  bool warm = false;
  int hops = 0;
  int64_t intended_ns = 0;
  int64_t deadline_ns = 0;
};

bool WantsLength(absl::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

// The request's bytes: request line, the headers the h2c engine sends too
// (Host, User-Agent, Accept; a body's Content-Type unless the
// template gives one), the template's headers, the body.
void BuildWire(const Target& t, const Request& r, absl::string_view path, absl::string_view method,
               bool with_body, std::string* out) {
  out->clear();
  absl::StrAppend(out, method, " ", path.empty() ? "/" : path, " HTTP/1.1\r\nHost: ",
                  Authority(t),
                  "\r\nUser-Agent: rsslab_loadgen\r\nAccept: */*\r\n");
  for (const std::string& h : r.headers) absl::StrAppend(out, h, "\r\n");
  if (with_body) {
    if (!HasHeader(r, "Content-Type")) {
      out->append("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    absl::StrAppend(out, "Content-Length: ", r.body.size(), "\r\n\r\n", r.body);
  } else {
    absl::StrAppend(out, WantsLength(method) ? "Content-Length: 0\r\n\r\n" : "\r\n");
  }
}

// A read or write error's outcome.
int Classify(const error_code& ec, bool* body_over) {
  *body_over = ec == bhttp::error::body_limit;
  if (ec == bhttp::error::header_limit || *body_over) return Failed(kTooLarge);
  if (ec == net::error::eof || ec == bhttp::error::partial_message ||
      ec == net::error::connection_reset || ec == net::error::broken_pipe) {
    return Failed(kClosed);
  }
  if (ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category()) {
    return Failed(kBadResponse);
  }
  return Failed(kOther);
}

class H1Worker : public WorkerLoop {
 public:
  H1Worker(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends);

 private:
  void Dispatch() override;
  void CheckDeadlines(int64_t now) override;
  void CloseAll() override;
  void Start(Conn* c, const Pending& p);
  void Send(Conn* c);
  void Connect(Conn* c);
  void Write(Conn* c);
  void Parse(Conn* c);
  void Read(Conn* c);
  void OnError(Conn* c, const error_code& ec);
  void OnResponse(Conn* c);
  void FollowRedirect(Conn* c, int status);
  void Fail(Conn* c, int outcome, absl::string_view detail, bool body_over = false);
  void Complete(Conn* c, int outcome, absl::string_view detail, bool body_over);
  void Close(Conn* c);

  const uint64_t max_body_;
  tcp::resolver::results_type endpoints_;
  error_code resolve_ec_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<Conn*> idle_;
};

H1Worker::H1Worker(RunState* st, const WorkerArgs& a, const StopFlag* stop, Sends* sends)
    : WorkerLoop(st, a, stop, sends),
      max_body_(static_cast<uint64_t>(MaxReceiveBytes(st->max_receive_mb))) {
  tcp::resolver resolver(io_);
  endpoints_ = resolver.resolve(st->target->host(), std::to_string(st->target->port()),
                                resolve_ec_);
  for (int i = 0; i < a.conns; ++i) {
    conns_.push_back(std::make_unique<Conn>(io_));
    Conn* c = conns_.back().get();
    if (st->target->fixed()) {
      st->target->Build(0, st->spec.seed(), &c->req);
      BuildWire(*st->target, c->req, absl::string_view(c->req.url).substr(st->target->base().size()),
                *c->req.method, c->req.has_body, &c->wire);
    }
    idle_.push_back(c);
  }
}

void H1Worker::Dispatch() {
  while (!pending().empty() && !idle_.empty()) {
    Conn* c = idle_.back();
    idle_.pop_back();
    Start(c, pending().Pop());
  }
}

void H1Worker::Start(Conn* c, const Pending& p) {
  c->busy = true;
  c->parser.reset();
  c->warm = p.warm;
  c->intended_ns = p.intended;
  c->hops = 0;
  c->retried = false;
  c->timed_out = false;
  c->deadline_ns = Deadline(p.intended);
  const Target& t = *st_->target;
  if (!t.fixed() || c->wire_redirected) {
    if (!t.fixed()) t.Build(p.idx, st_->spec.seed(), &c->req);
    BuildWire(t, c->req, absl::string_view(c->req.url).substr(t.base().size()), *c->req.method,
              c->req.has_body, &c->wire);
    c->wire_redirected = false;
  }
  Send(c);
}

void H1Worker::Send(Conn* c) {
  if (c->open) {
    Write(c);
  } else {
    Connect(c);
  }
}

void H1Worker::Connect(Conn* c) {
  if (resolve_ec_) {
    net::post(io_, [this, c] { Fail(c, Failed(kConnect), resolve_ec_.message()); });
    return;
  }
  net::async_connect(c->sock, endpoints_, [this, c](const error_code& ec, const tcp::endpoint&) {
    if (ec) {
      Fail(c, c->timed_out ? Failed(kTimeout) : Failed(kConnect), ec.message());
      return;
    }
    error_code ignored;
    c->sock.set_option(tcp::no_delay(true), ignored);
    c->open = true;
    c->served = false;
    c->buf.clear();
    Write(c);
  });
}

void H1Worker::Write(Conn* c) {
  c->location.clear();
  c->parser.emplace(&c->location);
  c->parser->header_limit(kMaxResponseHeaderBytes);
  c->parser->body_limit(max_body_);
  c->parser->eager(true);
  if (*c->req.method == "HEAD") c->parser->skip(true);
  net::async_write(c->sock, net::buffer(c->wire), [this, c](const error_code& ec, size_t) {
    if (ec) {
      OnError(c, ec);
      return;
    }
    Parse(c);
  });
}

// What the buffer holds into the parser; then more from the socket, or the
// response is whole.
void H1Worker::Parse(Conn* c) {
  error_code ec;
  while (c->buf.size() > 0) {
    const size_t n = c->parser->put(c->buf.data(), ec);
    c->buf.consume(n);
    if (ec == bhttp::error::need_more) break;
    if (ec) {
      OnError(c, ec);
      return;
    }
    if (c->parser->is_done()) {
      OnResponse(c);
      return;
    }
    if (n == 0) break;
  }
  Read(c);
}

void H1Worker::Read(Conn* c) {
  c->sock.async_read_some(c->buf.prepare(kReadChunk), [this, c](const error_code& ec, size_t n) {
    c->buf.commit(n);
    if (ec == net::error::eof && c->parser->got_some()) {
      // A body that runs to the connection's close ends here.
      error_code eof;
      c->parser->put_eof(eof);
      if (!eof && c->parser->is_done()) {
        Close(c);
        OnResponse(c);
        return;
      }
    }
    if (ec) {
      OnError(c, ec);
      return;
    }
    Parse(c);
  });
}

void H1Worker::OnError(Conn* c, const error_code& ec) {
  if (c->timed_out) {
    Fail(c, Failed(kTimeout), c->parser->got_some() ? "response incomplete" : "no response");
    return;
  }
  // A keep-alive connection the server closed while idle: the request again
  // on a new one (as curl and browsers do), once.
  const bool closed = ec == net::error::eof || ec == net::error::connection_reset ||
                      ec == net::error::broken_pipe;
  if (closed && c->served && !c->retried && !c->parser->got_some()) {
    c->retried = true;
    Close(c);
    Connect(c);
    return;
  }
  bool body_over = false;
  const int outcome = Classify(ec, &body_over);
  Fail(c, outcome, ec.message(), body_over);
}

void H1Worker::OnResponse(Conn* c) {
  const int status = c->parser->status;
  if (c->parser->keep_alive()) {
    c->served = true;
  } else {
    Close(c);
  }
  if (status >= 300 && status < 400 && st_->target->follow_redirects()) {
    FollowRedirect(c, status);
    return;
  }
  Complete(c, status < kHttpCodes && status >= 100 ? status : Failed(kBadResponse), "status",
           false);
}

void H1Worker::FollowRedirect(Conn* c, int status) {
  if (++c->hops > kMaxRedirects) {
    Fail(c, Failed(kRedirects), absl::StrCat("more than ", kMaxRedirects, " redirects"));
    return;
  }
  absl::string_view loc;
  if (!SameServerPath(*st_->target, c->location, &loc)) {
    Fail(c, Failed(kRedirects),
         absl::StrCat("a ", status, " to '", Echo(c->location, 100),
                      "': followed on the same server only"));
    return;
  }
  const bool get = status == 303 || ((status == 301 || status == 302) && *c->req.method == "POST");
  BuildWire(*st_->target, c->req, loc, get ? "GET" : *c->req.method, !get && c->req.has_body,
            &c->wire);
  c->wire_redirected = true;
  Send(c);
}

void H1Worker::Fail(Conn* c, int outcome, absl::string_view detail, bool body_over) {
  Close(c);  // its state is unknown
  Complete(c, outcome, detail, body_over);
}

void H1Worker::Complete(Conn* c, int outcome, absl::string_view detail, bool body_over) {
  const uint64_t req_bytes = c->req.has_body ? c->req.body.size() : 0;
  const uint64_t resp_bytes = c->parser ? c->parser->body_bytes : 0;
  const int64_t end =
      st_->Record(a_.index, c->warm, c->intended_ns, outcome, req_bytes, resp_bytes, [&] {
        return ErrorText(*st_, outcome, *c->req.method, c->req.url, detail, body_over);
      });
  c->busy = false;
  idle_.push_back(c);
  Finished(end);
}

void H1Worker::Close(Conn* c) {
  error_code ignored;
  c->sock.close(ignored);
  c->open = false;
}

// Requests past --deadline_ms: their socket closed, the pending operation
// ends with an error that OnError counts as TIMEOUT.
void H1Worker::CheckDeadlines(int64_t now) {
  for (auto& c : conns_) {
    if (c->busy && !c->timed_out && now > c->deadline_ns) {
      c->timed_out = true;
      Close(c.get());
    }
  }
}

void H1Worker::CloseAll() {
  for (auto& c : conns_) Close(c.get());
}

}  // namespace

void RunH1Worker(RunState* st, const WorkerArgs& args, const StopFlag* stop, Sends* sends) {
  H1Worker w(st, args, stop, sends);
  w.Run();
}

}  // namespace http
}  // namespace rsslab
