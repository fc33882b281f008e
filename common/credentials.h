// The credentials rsslab's servers and clients load, and the checks made
// with them that need no gRPC: the listen rule, the bearer token. Security
// (common/auth.h) adds gRPC's credentials and channels on top; the Python
// package uses this part alone, so that it loads no gRPC C++ unless its
// native Control transport is asked for.
//
// Example:
//   SecurityOptions o;
//   o.auth_token_file = "/run/rsslab/token";
//   absl::StatusOr<Credentials> c = Credentials::Load(o);
//   absl::Status ok = c->CheckListen("0.0.0.0:50052", "control");
//   absl::Status who = c->AuthorizeHeader(&header);  // "Bearer <token>"

#ifndef RSSLAB_COMMON_CREDENTIALS_H_
#define RSSLAB_COMMON_CREDENTIALS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

struct SecurityOptions {
  std::string tls_cert;         // PEM file
  std::string tls_key;          // PEM file
  std::string tls_ca;           // PEM file
  std::string tls_server_name;  // client side only
  std::string auth_token_file;
  bool insecure_listen = false;
};

class Credentials {
 public:
  Credentials() = default;  // no TLS, no token
  // Reads the files named in `options`; a missing or empty file is an error
  // naming it.
  static absl::StatusOr<Credentials> Load(const SecurityOptions& options);

  bool tls() const { return !cert_.empty(); }
  bool client_tls() const { return !ca_.empty() || !cert_.empty(); }
  bool has_token() const { return !token_.empty(); }

  // Listening anywhere but loopback needs TLS or a token (or
  // --insecure_listen, which is logged to stderr).
  absl::Status CheckListen(absl::string_view address, absl::string_view flag) const;
  // OK, or UNAUTHENTICATED when a token is configured and `authorization`
  // (the "authorization" header's value; nullptr: the call has none) is not
  // "Bearer <token>".
  absl::Status AuthorizeHeader(const std::string* authorization) const;
  // The credential flags (absolute paths) that give a child process, e.g.
  // a server the agent launches, the same protection.
  std::vector<std::string> FlagsForChild() const;

 protected:
  SecurityOptions options_;
  std::string cert_, key_, ca_, server_name_, token_;
  bool insecure_listen_ = false;
};

}  // namespace rsslab

#endif  // RSSLAB_COMMON_CREDENTIALS_H_
