#include "server/dispatch.h"

#include <utility>

namespace rsslab {

void PendingQueue::Enqueue(WorkerPool* workers, PendingCall call,
                           std::function<void(int)> serve_oldest) {
  {
    absl::MutexLock lock(&mu_);
    pending_.push_back(std::move(call));
  }
  if (workers->Submit(std::move(serve_oldest))) return;
  PendingCall p;
  {
    absl::MutexLock lock(&mu_);
    // The newest entry, this call's or a later one's: Stop() has begun, so
    // every later Submit fails too and takes one entry each.
    p = std::move(pending_.back());
    pending_.pop_back();
  }
  p.done(absl::UnavailableError("server is shutting down"));
}

PendingCall PendingQueue::PopOldest() {
  absl::MutexLock lock(&mu_);
  PendingCall p = std::move(pending_.front());
  pending_.pop_front();
  return p;
}

}  // namespace rsslab
