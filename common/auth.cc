#include "common/auth.h"

#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "grpcpp/support/client_interceptor.h"
#include "common/grpc_status.h"

ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this side (enables TLS on servers).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA: servers require and verify client certificates (mutual TLS); clients verify the server with it.");
ABSL_FLAG(std::string, tls_server_name, "", "Clients: the name to verify in the server's certificate instead of the host.");
ABSL_FLAG(std::string, auth_token_file, "", "File whose first line is the shared bearer token; servers require it, clients send it.");
ABSL_FLAG(bool, insecure_listen, false, "Servers: allow listening beyond loopback without TLS or a token (not recommended).");

namespace rsslab {
namespace {

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
  absl::StatusOr<Credentials> c = Credentials::Load(o);
  if (!c.ok()) return c.status();
  return Security(*std::move(c));
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
