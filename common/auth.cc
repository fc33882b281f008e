#include "common/auth.h"

#include <limits.h>
#include <stdlib.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/support/client_interceptor.h"
#include "common/files.h"
#include "common/grpc_status.h"
#include "common/listen.h"

ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this side (enables TLS on servers).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA: servers require and verify client certificates (mutual TLS); clients verify the server with it.");
ABSL_FLAG(std::string, tls_server_name, "", "Clients: the name to verify in the server's certificate instead of the host.");
ABSL_FLAG(std::string, auth_token_file, "", "File whose first line is the shared bearer token; servers require it, clients send it.");
ABSL_FLAG(bool, insecure_listen, false, "Servers: allow listening beyond loopback without TLS or a token (not recommended).");

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

class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* header_;
};

class TokenInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(std::string token) : header_("Bearer " + std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

absl::StatusOr<Security> Security::Load(const SecurityOptions& o) {
  Security s;
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

absl::StatusOr<Security> Security::FromFlags() {
  SecurityOptions o;
  o.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  o.tls_key = absl::GetFlag(FLAGS_tls_key);
  o.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  o.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  o.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  o.insecure_listen = absl::GetFlag(FLAGS_insecure_listen);
  return Load(o);
}

absl::Status Security::CheckListen(absl::string_view address, absl::string_view flag) const {
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

std::vector<std::string> Security::FlagsForChild() const {
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

std::shared_ptr<grpc::ServerCredentials> Security::ServerCredentials() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(
      ca_.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                  : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = ca_;
  o.pem_key_cert_pairs.push_back({key_, cert_});
  return grpc::SslServerCredentials(o);
}

grpc::Status Security::Authorize(const grpc::ServerContextBase& context) const {
  if (token_.empty()) return grpc::Status::OK;
  const auto& md = context.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return ToGrpc(AuthorizeHeader(nullptr));
  const std::string value(it->second.data(), it->second.size());
  return ToGrpc(AuthorizeHeader(&value));
}

absl::Status Security::AuthorizeHeader(const std::string* authorization) const {
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

std::shared_ptr<grpc::Channel> Security::Channel(const std::string& target,
                                                 const grpc::ChannelArguments& args) const {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments a = args;
  if (client_tls()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ca_;
    o.pem_private_key = key_;
    o.pem_cert_chain = cert_;
    creds = grpc::SslCredentials(o);
    if (!server_name_.empty()) a.SetSslTargetNameOverride(server_name_);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  if (token_.empty()) return grpc::CreateCustomChannel(target, creds, a);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> f;
  f.push_back(std::make_unique<TokenInterceptorFactory>(token_));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, creds, a, std::move(f));
}

}  // namespace rsslab
