#include "loadgen/http/http_target.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/echo.h"
#include "common/files.h"

namespace rsslab {
namespace http {
namespace {

constexpr size_t kMaxHeaders = 64;
constexpr size_t kMaxHeaderBytes = 8192;

absl::Status Bad(absl::string_view origin, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": ", why));
}

// An RFC 9110 token (methods, header names).
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(c) && !absl::StrContains("!#$%&'*+-.^_`|~", c)) return false;
  }
  return true;
}

// Printable ASCII, no control character (CR/LF would split the request).
bool IsPrintable(absl::string_view s) {
  for (char c : s) {
    if (!absl::ascii_isprint(c)) return false;
  }
  return true;
}

absl::StatusOr<RequestLine> MakeLine(absl::string_view method, absl::string_view path,
                                     const std::string* body, absl::string_view origin) {
  RequestLine l;
  if (!IsToken(method) || absl::AsciiStrToUpper(method) != method) {
    return Bad(origin, absl::StrCat("method ", Echo(method, 32),
                                    " is not an upper-case token (GET, POST, ...)"));
  }
  l.method = std::string(method);
  // Spaces may sit inside placeholders ({{rand_int 1 9}}), not in the path.
  std::string bare(path);
  for (size_t i; (i = bare.find("{{")) != std::string::npos;) {
    const size_t e = bare.find("}}", i);
    bare.erase(i, e == std::string::npos ? std::string::npos : e + 2 - i);
  }
  if (path.empty() || path[0] != '/' || !IsPrintable(path) || absl::StrContains(bare, ' ')) {
    return Bad(origin, absl::StrCat("path ", Echo(path, 64),
                                    " must start with '/' and be printable without spaces"));
  }
  absl::StatusOr<TextTemplate> p = TextTemplate::Compile(path, origin);
  if (!p.ok()) return p.status();
  l.path = *std::move(p);
  if (body != nullptr) {
    absl::StatusOr<TextTemplate> b = TextTemplate::Compile(*body, origin);
    if (!b.ok()) return b.status();
    l.body = *std::move(b);
    l.has_body = true;
  }
  return l;
}

// --requests_file: `METHOD PATH [BODY]` a line.
absl::Status ReadRequestsFile(const std::string& path, std::vector<RequestLine>* lines) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, kDataFileMaxBytes, "--requests_file");
  if (!text.ok()) return text.status();
  int n = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++n;
    if (absl::EndsWith(line, "\r")) line.remove_suffix(1);
    const std::string origin = absl::StrFormat("%s:%d", Echo(path, 200), n);
    if (line.empty() || line[0] == '#') continue;
    if (lines->size() >= static_cast<size_t>(kDataFileMaxLines)) {
      return Bad(origin, absl::StrFormat("more than %d requests", kDataFileMaxLines));
    }
    std::vector<absl::string_view> w = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    if (w.size() < 2) return Bad(origin, "want METHOD PATH [BODY]");
    std::string body = w.size() == 3 ? std::string(w[2]) : "";
    absl::StatusOr<RequestLine> l = MakeLine(w[0], w[1], w.size() == 3 ? &body : nullptr, origin);
    if (!l.ok()) return l.status();
    lines->push_back(*std::move(l));
  }
  if (lines->empty()) return Bad(Echo(path, 200), "--requests_file holds no request");
  return absl::OkStatus();
}

// http://HOST:PORT[/PATH] into its parts (no userinfo, no fragment).
absl::Status SplitUrl(const std::string& url, std::string* host, int* port, std::string* path) {
  const std::string shown = absl::StrCat("--target=", Echo(url, 200));
  if (absl::StartsWith(url, "https://")) {
    return Bad(shown, "https is not supported: HTTP/1.1 and h2c (cleartext) only");
  }
  if (!absl::StartsWith(url, "http://")) return Bad(shown, "want http://HOST:PORT/PATH");
  absl::string_view rest = absl::string_view(url).substr(7);
  const size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  *path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (absl::StrContains(authority, '@')) return Bad(shown, "no user@ part, please");
  const size_t colon = authority.rfind(':');
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(authority.substr(colon + 1), port) ||
      *port < 1 || *port > 65535) {
    return Bad(shown, "want an explicit port, http://HOST:PORT/...");
  }
  *host = std::string(authority.substr(0, colon));
  if (host->empty() || !IsPrintable(*host)) return Bad(shown, "empty or unprintable host");
  return absl::OkStatus();
}

}  // namespace

bool IsHttpUrl(absl::string_view target) {
  return absl::StartsWith(target, "http://") || absl::StartsWith(target, "https://");
}

absl::StatusOr<Target> ParseTarget(const TargetSpec& spec) {
  Target t;
  std::string path;
  if (absl::Status s = SplitUrl(spec.url, &t.host_, &t.port_, &path); !s.ok()) return s;
  t.base_ = absl::StrCat("http://", t.host_, ":", t.port_);
  if (spec.version == "1.1") {
    t.version_ = Version::kHttp11;
  } else if (spec.version == "h2c") {
    t.version_ = Version::kH2c;
  } else {
    return Bad(absl::StrCat("--http_version=", Echo(spec.version, 32)), "want 1.1 or h2c");
  }
  t.follow_redirects_ = spec.follow_redirects;
  if (spec.headers.size() > kMaxHeaders) {
    return Bad("--header", absl::StrFormat("more than %d headers", kMaxHeaders));
  }
  for (const std::string& h : spec.headers) {
    const std::string origin = absl::StrCat("--header=", Echo(h, 100));
    const size_t colon = h.find(':');
    if (colon == std::string::npos || !IsToken(h.substr(0, colon))) {
      return Bad(origin, "want Name: value (a token, a colon, the value)");
    }
    if (h.size() > kMaxHeaderBytes || !IsPrintable(h)) {
      return Bad(origin, absl::StrFormat("printable and at most %d bytes", kMaxHeaderBytes));
    }
    absl::StatusOr<TextTemplate> v = TextTemplate::Compile(
        absl::StripLeadingAsciiWhitespace(absl::string_view(h).substr(colon + 1)), origin);
    if (!v.ok()) return v.status();
    t.headers_.emplace_back(h.substr(0, colon), *std::move(v));
  }
  if (!spec.requests_file.empty()) {
    if (!spec.body.empty() || !spec.method.empty() || path != "/") {
      return Bad("--requests_file",
                 "gives each request's method, path and body: drop --method, --body and the "
                 "--target's path");
    }
    if (absl::Status s = ReadRequestsFile(spec.requests_file, &t.lines_); !s.ok()) return s;
    t.describe_ = absl::StrFormat("%s: %d requests", Echo(spec.requests_file, 200),
                                  t.lines_.size());
    return t;
  }
  const std::string method = !spec.method.empty() ? spec.method : spec.body.empty() ? "GET" : "POST";
  absl::StatusOr<RequestLine> l =
      MakeLine(method, path, spec.body.empty() ? nullptr : &spec.body, "--target");
  if (!l.ok()) return l.status();
  t.lines_.push_back(*std::move(l));
  t.describe_ = absl::StrCat(method, " ", path);
  return t;
}

bool Target::fixed() const {
  if (lines_.size() != 1 || !lines_[0].path.literal() || !lines_[0].body.literal()) return false;
  for (const auto& [name, value] : headers_) {
    if (!value.literal()) return false;
  }
  return true;
}

void Target::Build(uint64_t seq, uint64_t seed, Request* out) const {
  const RequestLine& l = lines_[seq % lines_.size()];
  out->method = &l.method;
  out->url.assign(base_);
  l.path.Expand(seq, seed, &out->url);
  out->body.clear();
  out->has_body = l.has_body;
  if (l.has_body) l.body.Expand(seq, seed, &out->body);
  out->headers.resize(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) {
    out->headers[i].assign(headers_[i].first).append(": ");
    headers_[i].second.Expand(seq, seed, &out->headers[i]);
  }
}

Target Target::WithBase(const std::string& host, int port) const {
  Target t = *this;
  t.host_ = host;
  t.port_ = port;
  t.base_ = absl::StrCat("http://", host, ":", port);
  return t;
}

}  // namespace http
}  // namespace rsslab
