// A run's records: dir/events.jsonl, written as things happen and read back
// by every summary (the run's own, `report`, a sweep's, a resumed run's).
//
//   auto log = rsslab::EventLog::Create("results/run1", /*fsync=*/false);
//   rsslab::v1::Event e; *e.mutable_header() = ...;
//   (*log)->Append(e);                     // one JSON line, flushed now
//   ...
//   int skipped = 0;
//   auto events = rsslab::ReadEvents("results/run1", &skipped);
//
// Each line is a rsslab.v1.Event printed by protobuf's JSON printer with the
// .proto field names, so `jq`, pandas and the report tool read it directly,
// and an interrupted run keeps every line already written (a torn last line
// is skipped when read back).
#ifndef RSSLAB_LOADGEN_RESULTS_EVENT_LOG_H_
#define RSSLAB_LOADGEN_RESULTS_EVENT_LOG_H_

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/results.pb.h"

namespace rsslab {

class EventLog {
 public:
  // Creates `dir` (and parents) and dir/events.jsonl; fails if it exists,
  // so a run never appends to another run's records.
  static absl::StatusOr<std::unique_ptr<EventLog>> Create(
      const std::string& dir, bool fsync);
  // Opens dir/events.jsonl of an interrupted run to append to it (--resume):
  // a torn last line (a record cut short by a kill: no final '\n') is cut
  // off first, its size in *torn_bytes, and numbering continues after the
  // last record's seq. Every complete line is kept as it is.
  static absl::StatusOr<std::unique_ptr<EventLog>> Reopen(
      const std::string& dir, bool fsync, uint64_t* torn_bytes);
  ~EventLog();

  // Stamps seq and (if unset) unix_nanos, writes one line and flushes it.
  absl::Status Append(rsslab::v1::Event event) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t count() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& path() const { return path_; }

 private:
  EventLog(std::string path, FILE* f, bool fsync)
      : path_(std::move(path)), file_(f), fsync_(fsync) {}
  const std::string path_;
  mutable absl::Mutex mu_;
  FILE* file_ ABSL_GUARDED_BY(mu_);
  const bool fsync_;
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  // File size after the last complete record: a failed write (disk full,
  // quota) is cut back to it, so the file stays valid line by line.
  off_t good_size_ ABSL_GUARDED_BY(mu_) = 0;
};

// OK when `dir` does not exist or is empty; FAILED_PRECONDITION naming what
// is there otherwise: a new run never writes into another run's directory.
absl::Status CheckRunDirEmpty(const std::string& dir);

std::string EventToJson(const rsslab::v1::Event& event);
// Reads dir/events.jsonl; a line that does not parse (a write cut short by
// a crash) is skipped and counted in *skipped.
absl::StatusOr<std::vector<rsslab::v1::Event>> ReadEvents(
    const std::string& dir, int* skipped);

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_EVENT_LOG_H_
