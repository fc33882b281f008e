// What an HTTP load step sends: the server's base URL, the protocol, and the
// requests (one templated request, or a file's lines in turn), each built
// per request from the same placeholders as --data (proto_call.h).
//
//   absl::StatusOr<rsslab::http::Target> t = rsslab::http::ParseTarget(
//       {.url = "http://127.0.0.1:8000/items/{{seq}}", .version = "1.1"});
//   rsslab::http::Request r;
//   t->Build(/*seq=*/7, /*seed=*/1, &r);   // r.url = "http://127.0.0.1:8000/items/7"
//
// Requests file (--requests_file): one request a line, `METHOD PATH` or
// `METHOD PATH BODY` (the body is the rest of the line, taken verbatim);
// blank lines and lines starting with '#' are skipped. Request `seq` uses
// line seq % lines. At most kDataFileMaxLines lines and kDataFileMaxBytes.
#ifndef RSSLAB_LOADGEN_HTTP_HTTP_TARGET_H_
#define RSSLAB_LOADGEN_HTTP_HTTP_TARGET_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadgen/proto_call.h"

namespace rsslab {
namespace http {

enum class Version { kHttp11, kH2c };

// An --target that names an HTTP server rather than a gRPC one.
bool IsHttpUrl(absl::string_view target);

// One request's templates.
struct RequestLine {
  std::string method;  // upper-case token: GET, POST, ...
  TextTemplate path;   // starts with '/'; may carry a query
  TextTemplate body;   // sent when has_body
  bool has_body = false;
};

// One request, built.
struct Request {
  const std::string* method = nullptr;
  std::string url;
  std::string body;
  bool has_body = false;
  std::vector<std::string> headers;  // "Name: value"
};

struct TargetSpec {
  std::string url;       // http://HOST:PORT[/PATH]
  std::string version = "1.1";  // 1.1 or h2c
  std::string method;    // default GET, POST with a body
  std::vector<std::string> headers;  // "Name: value", each repeatable
  std::string body;      // a template; empty: no body
  std::string requests_file;
  bool follow_redirects = false;
};

class Target {
 public:
  const std::string& base() const { return base_; }  // http://HOST:PORT
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  Version version() const { return version_; }
  bool follow_redirects() const { return follow_redirects_; }
  // Every request the same (no placeholder, one line): the engine sets it
  // on a connection once.
  bool fixed() const;
  // "GET /path" (or "FILE: N requests") for summaries and progress lines.
  const std::string& describe() const { return describe_; }
  // Request `seq` into *out (reusing its buffers).
  void Build(uint64_t seq, uint64_t seed, Request* out) const;
  // A copy aimed at another server (a sweep cell's port): same requests.
  Target WithBase(const std::string& host, int port) const;

 private:
  friend absl::StatusOr<Target> ParseTarget(const TargetSpec& spec);
  std::string base_, host_, describe_;
  int port_ = 0;
  Version version_ = Version::kHttp11;
  bool follow_redirects_ = false;
  std::vector<std::pair<std::string, TextTemplate>> headers_;  // name, value
  std::vector<RequestLine> lines_;
};

// INVALID_ARGUMENT naming the flag (or FILE:LINE) and the rule broken.
absl::StatusOr<Target> ParseTarget(const TargetSpec& spec);

}  // namespace http
}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_HTTP_HTTP_TARGET_H_
