// --as_user: whose registry entries rsslab_ctl and the loadgen believe
// besides their own user's (registry/registry.h, CheckTrusted). Defined once
// here for every binary that resolves --control=all:NAME or pid:PID.
//
//   absl::StatusOr<registry::Trust> trust = registry::TrustFromFlags();
#ifndef RSSLAB_REGISTRY_REGISTRY_FLAGS_H_
#define RSSLAB_REGISTRY_REGISTRY_FLAGS_H_

#include "absl/status/statusor.h"
#include "registry/registry.h"

namespace rsslab {
namespace registry {

// Trust::Self() plus the users --as_user names; the error names the bad one.
absl::StatusOr<Trust> TrustFromFlags();

}  // namespace registry
}  // namespace rsslab

#endif  // RSSLAB_REGISTRY_REGISTRY_FLAGS_H_
