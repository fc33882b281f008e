// Handler exceptions, logged without flooding stderr and counted by type.
//
// The first `full_first` errors are printed with their traceback; after
// that only one line per `interval` (when errors keep coming) with the count
// of each exception type since the previous line, so a load with one bad
// param cannot grow the log without bound. Counts per type are kept for
// the Prometheus metrics (rsslab_handler_errors_total{type=...}); at most
// kMaxTypes distinct names are kept, later ones count as "other".
//
//   HandlerErrorLog log;
//   if (log.Note("ValueError", absl::Now())) PrintTraceback();

#ifndef RSSLAB_SERVER_PYTHON_ERROR_LOG_H_
#define RSSLAB_SERVER_PYTHON_ERROR_LOG_H_

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace rsslab {

class HandlerErrorLog {
 public:
  static constexpr int kMaxTypes = 64;
  explicit HandlerErrorLog(int full_first = 5, absl::Duration interval = absl::Seconds(10),
                           FILE* out = stderr)
      : full_first_(full_first), interval_(interval), out_(out) {}

  // Counts one error of `type`. True when its traceback should be printed;
  // may print the summary line of the interval that ended.
  bool Note(const std::string& type, absl::Time now);
  // Prints the pending summary, if any (at shutdown).
  void Flush(absl::Time now);
  // Errors per type since start.
  std::map<std::string, uint64_t> Totals() const;
  uint64_t total() const;

 private:
  void PrintPendingLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int full_first_;
  const absl::Duration interval_;
  FILE* const out_;
  mutable absl::Mutex mu_;
  uint64_t total_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, uint64_t> totals_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> pending_ ABSL_GUARDED_BY(mu_);
  absl::Time pending_since_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_PYTHON_ERROR_LOG_H_
