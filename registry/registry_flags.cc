#include "registry/registry_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"

ABSL_FLAG(std::vector<std::string>, as_user, {},
          "--control=all:NAME / pid:PID: also trust registry entries (and send calls and the "
          "token) to processes of these users, names or uids, comma-separated; the reader's own "
          "user is always trusted, no other (not even for root) unless named.");

namespace rsslab {
namespace registry {

absl::StatusOr<Trust> TrustFromFlags() { return TrustUsers(absl::GetFlag(FLAGS_as_user)); }

}  // namespace registry
}  // namespace rsslab
