#include "server/python/error_log.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rsslab {

bool HandlerErrorLog::Note(const std::string& type, absl::Time now) {
  absl::MutexLock l(&mu_);
  std::string key = type;
  if (totals_.find(key) == totals_.end() && totals_.size() >= kMaxTypes) key = "other";
  ++totals_[key];
  ++total_;
  if (total_ <= static_cast<uint64_t>(full_first_)) {
    if (total_ == static_cast<uint64_t>(full_first_)) {
      fprintf(out_,
              "rsslab_server: %d handler errors printed in full; from now on one line per %s "
              "with the count of each exception type\n",
              full_first_, absl::FormatDuration(interval_).c_str());
      fflush(out_);
    }
    return true;
  }
  if (pending_.empty()) pending_since_ = now;
  ++pending_[key];
  if (now - pending_since_ >= interval_) PrintPendingLocked(now);
  return false;
}

void HandlerErrorLog::Flush(absl::Time now) {
  absl::MutexLock l(&mu_);
  PrintPendingLocked(now);
}

void HandlerErrorLog::PrintPendingLocked(absl::Time now) {
  if (pending_.empty()) return;
  std::string line;
  for (const auto& [type, n] : pending_) {
    absl::StrAppend(&line, line.empty() ? "" : ", ", type, " x", n);
  }
  fprintf(out_, "rsslab_server: handler errors in the last %.1f s: %s (%llu in all)\n",
          absl::ToDoubleSeconds(now - pending_since_), line.c_str(),
          static_cast<unsigned long long>(total_));
  fflush(out_);
  pending_.clear();
}

std::map<std::string, uint64_t> HandlerErrorLog::Totals() const {
  absl::MutexLock l(&mu_);
  return totals_;
}

uint64_t HandlerErrorLog::total() const {
  absl::MutexLock l(&mu_);
  return total_;
}

}  // namespace rsslab
