// Who may talk to rsslab's servers: TLS (mutual when a CA is given) and a
// shared bearer token, for every binary, configured the same way.
//
// Flags (defined once here, used by rsslab_server, rsslab_ctl,
// rsslab_loadgen and rsslab_agent):
//   --tls_cert, --tls_key   this side's certificate chain and key (PEM files)
//   --tls_ca                CA that verifies the peer; on a server it turns
//                           on mutual TLS (clients must present a cert)
//   --tls_server_name       clients: name to verify instead of the host
//   --auth_token_file       shared bearer token (first line of the file)
//   --insecure_listen       servers: allow non-loopback listening with
//                           neither TLS nor a token (logged loudly)
//
// Example (server):
//   absl::StatusOr<Security> sec = Security::FromFlags();
//   if (!sec.ok()) Die(sec.status());
//   absl::Status ok = sec->CheckListen("0.0.0.0:50052", "control_listen");
//   builder.AddListeningPort(addr, sec->ServerCredentials());
//   ...in a method: grpc::Status s = sec->Authorize(*context);
// Example (client):
//   auto channel = sec->Channel("host:50052");   // TLS and/or token added

#ifndef RSSLAB_COMMON_AUTH_H_
#define RSSLAB_COMMON_AUTH_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/credentials.h"
#include "grpcpp/grpcpp.h"

namespace rsslab {

// Credentials (common/credentials.h) plus what gRPC needs of them.
class Security : public Credentials {
 public:
  Security() = default;  // no TLS, no token
  // Credentials::Load, as a Security.
  static absl::StatusOr<Security> Load(const SecurityOptions& options);
  // Load() with the --tls_* / --auth_token_file / --insecure_listen flags.
  static absl::StatusOr<Security> FromFlags();

  std::shared_ptr<grpc::ServerCredentials> ServerCredentials() const;
  // OK, or UNAUTHENTICATED when a token is configured and the call does not
  // carry "authorization: Bearer <token>".
  grpc::Status Authorize(const grpc::ServerContextBase& context) const;

  // A channel with TLS when --tls_ca/--tls_cert are set and the token sent
  // on every call when configured.
  std::shared_ptr<grpc::Channel> Channel(const std::string& target,
                                         const grpc::ChannelArguments& args) const;
  std::shared_ptr<grpc::Channel> Channel(const std::string& target) const {
    return Channel(target, grpc::ChannelArguments());
  }

 private:
  explicit Security(Credentials c) : Credentials(std::move(c)) {}
};

}  // namespace rsslab

#endif  // RSSLAB_COMMON_AUTH_H_
