#include "common/credentials.h"

#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/listen.h"

namespace rsslab {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* flag, int64_t max_bytes) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, max_bytes, absl::StrCat("--", flag));
  if (!text.ok()) return text.status();
  if (text->empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", path, " is empty"));
  return text;
}

// Compares in time independent of where the strings differ.
bool SameSecret(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<Credentials> Credentials::Load(const SecurityOptions& o) {
  Credentials s;
  s.options_ = o;
  s.server_name_ = o.tls_server_name;
  s.insecure_listen_ = o.insecure_listen;
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  if (!o.tls_cert.empty()) {
    absl::StatusOr<std::string> c = ReadFile(o.tls_cert, "tls_cert", kTlsFileMaxBytes);
    if (!c.ok()) return c.status();
    absl::StatusOr<std::string> k = ReadFile(o.tls_key, "tls_key", kTlsFileMaxBytes);
    if (!k.ok()) return k.status();
    // The key is a secret like the token (whoever reads it can pose as this
    // side); the certificate and the CA are public and are not checked.
    if (absl::Status p = CheckPrivateFile(o.tls_key, "--tls_key"); !p.ok()) return p;
    s.cert_ = *std::move(c);
    s.key_ = *std::move(k);
  }
  if (!o.tls_ca.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(o.tls_ca, "tls_ca", kTlsFileMaxBytes);
    if (!ca.ok()) return ca.status();
    s.ca_ = *std::move(ca);
  }
  if (!o.auth_token_file.empty()) {
    absl::StatusOr<std::string> t =
        ReadFile(o.auth_token_file, "auth_token_file", kTokenFileMaxBytes);
    if (!t.ok()) return t.status();
    // Refused rather than warned about: the token lets whoever reads it
    // drive the server and make the agent start processes (docs/SECURITY.md).
    if (absl::Status p = CheckPrivateFile(o.auth_token_file, "--auth_token_file"); !p.ok()) {
      return p;
    }
    absl::string_view line = *t;
    line = line.substr(0, line.find('\n'));
    line = absl::StripAsciiWhitespace(line);
    if (line.size() < 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--auth_token_file: the token in ", o.auth_token_file,
          " is shorter than 16 characters; use e.g. `openssl rand -hex 32`"));
    }
    s.token_ = std::string(line);
  }
  return s;
}

absl::Status Credentials::CheckListen(absl::string_view address, absl::string_view flag) const {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  if (IsLoopback(hp->host) || tls() || has_token()) return absl::OkStatus();
  if (insecure_listen_) {
    fprintf(stderr,
            "WARNING: --%s=%s listens beyond loopback with neither TLS nor a token "
            "(--insecure_listen): anyone who can reach it can control this process\n",
            std::string(flag).c_str(), std::string(address).c_str());
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "refusing --", flag, "=", address,
      ": listening beyond loopback needs --tls_cert/--tls_key (and --tls_ca for mutual TLS) "
      "or --auth_token_file (or --insecure_listen, not recommended)"));
}

std::vector<std::string> Credentials::FlagsForChild() const {
  std::vector<std::string> out;
  auto add = [&out](const char* flag, const std::string& path) {
    if (path.empty()) return;
    char real[PATH_MAX];
    out.push_back(absl::StrCat("--", flag, "=", realpath(path.c_str(), real) ? real : path));
  };
  add("auth_token_file", options_.auth_token_file);
  add("tls_cert", options_.tls_cert);
  add("tls_key", options_.tls_key);
  add("tls_ca", options_.tls_ca);
  return out;
}

absl::Status Credentials::AuthorizeHeader(const std::string* authorization) const {
  if (token_.empty()) return absl::OkStatus();
  if (authorization == nullptr) {
    return absl::UnauthenticatedError("missing bearer token (client needs --auth_token_file)");
  }
  absl::string_view v(*authorization);
  if (!absl::ConsumePrefix(&v, "Bearer ") || !SameSecret(v, token_)) {
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

}  // namespace rsslab
