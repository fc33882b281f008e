#include "loadgen/receive_bound.h"

#include <cstddef>

#include <grpcpp/resource_quota.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "loadgen/status_code.h"

namespace rsslab {

void BoundReceive(grpc::ChannelArguments* args, int max_receive_mb) {
  // gRPC 1.51 assembles a reply whole before checking it against the
  // bound, so the bound alone leaves concurrency x reply size in memory.
  args->SetMaxReceiveMessageSize(MaxReceiveBytes(max_receive_mb));
  // The quota caps what all channels together hold: over it, gRPC shrinks
  // windows and then cancels a call with RESOURCE_EXHAUSTED ("Buffers
  // full"). One for the process, never destroyed (channels outlive any
  // owner); it only grows, to the largest bound asked for (tests run
  // engines with different bounds in one process).
  static absl::Mutex mu;
  static grpc::ResourceQuota* const quota = new grpc::ResourceQuota("rsslab-loadgen");
  static size_t size ABSL_GUARDED_BY(mu) = 0;
  {
    absl::MutexLock lock(&mu);
    const size_t want = static_cast<size_t>(ReceiveQuotaMb(max_receive_mb)) << 20;
    if (want > size) {
      quota->Resize(want);
      size = want;
    }
  }
  args->SetResourceQuota(*quota);
}

}  // namespace rsslab
