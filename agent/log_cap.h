// A launched program's log with a size cap: the agent's servers and
// commands may run for hours and print without end, so their log keeps its
// head (what was run, start-up) and its tail (what a failure report needs)
// and drops the middle, leaving one line that says how much went.
//
// The log is written by a small process of its own (the log writer, the
// agent's binary run again with RunLogWriterIfAsked's arguments), reading
// the program's stdout and stderr from a pipe. It is not the agent: a
// program outlives an agent that dies, and its pipe must not break then.
// The log writer exits once every holder of the pipe's write end has.
//
// Layout once the cap was reached (never more than max_bytes on disk):
//
//   the first max_bytes/4 bytes (cut back to a line's end)
//   # rsslab_agent: 123456789 bytes of output dropped here (log capped at 8 MiB)
//   the last bytes: at least max_bytes/4, cut forward to a line's start
//
// Example (what the log writer does with its pipe):
//
//   absl::StatusOr<std::unique_ptr<rsslab::launch::CappedLog>> log =
//       rsslab::launch::CappedLog::Open("/tmp/logs/s0001.log", 8 << 20);
//   (*log)->Append("a line\n");
#ifndef RSSLAB_AGENT_LOG_CAP_H_
#define RSSLAB_AGENT_LOG_CAP_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace rsslab {
namespace launch {

// The smallest cap: the head and the kept tail must each be far larger
// than one read of the pipe (kLogWriterChunk), so that cutting the log
// never copies a range onto itself.
inline constexpr int64_t kMinLogCapBytes = 1 << 20;
inline constexpr size_t kLogWriterChunk = 64 << 10;
// The text every marker line starts with (tests and readers look for it).
inline constexpr char kDroppedMarker[] = "# rsslab_agent: ";

class CappedLog {
 public:
  // Appends to `path` (created if missing; what is there, e.g. the
  // agent's header, counts toward the cap and is part of the head).
  // INVALID_ARGUMENT for a cap below kMinLogCapBytes.
  static absl::StatusOr<std::unique_ptr<CappedLog>> Open(const std::string& path,
                                                         int64_t max_bytes);
  ~CappedLog();
  CappedLog(const CappedLog&) = delete;
  CappedLog& operator=(const CappedLog&) = delete;

  // Appends, cutting the middle out first when the log would pass the cap.
  // A write error (a full disk) loses the data, never blocks the program.
  void Append(absl::string_view data);

  int64_t size() const { return size_; }
  int64_t dropped() const { return dropped_; }

 private:
  CappedLog(int fd, int64_t size, int64_t max_bytes);
  void Cut(absl::string_view incoming);
  void Write(int64_t offset, absl::string_view data);

  const int fd_;  // the sole writer: pwrite at tracked offsets, no O_APPEND
  int64_t size_;
  const int64_t max_bytes_;
  int64_t head_len_ = -1;    // fixed at the first cut
  int64_t marker_len_ = 0;   // the marker line after the head
  int64_t dropped_ = 0;
};

// The arguments (after the binary) that make RunLogWriterIfAsked run a
// writer of `path` with `max_bytes`.
std::vector<std::string> LogWriterArgs(const std::string& path, int64_t max_bytes);

// At the top of a main() whose binary serves as the log writer: if argv is
// LogWriterArgs', copies stdin into a CappedLog until EOF, sets *rc and
// returns true; otherwise returns false and the program goes on.
bool RunLogWriterIfAsked(int argc, char** argv, int* rc);

// The launcher's side of one log writer: its stdout is the write end of a
// pipe this holds the read end of, so the writer's exit (the log complete)
// is seen without being its parent.
class LogWriterDone {
 public:
  explicit LogWriterDone(int read_fd) : fd_(read_fd) {}
  ~LogWriterDone();
  LogWriterDone(const LogWriterDone&) = delete;
  LogWriterDone& operator=(const LogWriterDone&) = delete;
  // Until the writer has exited (every byte of the program's output is in
  // the log), up to `timeout`; true if it has. A program's own child
  // still holding its stdout keeps the writer running.
  bool Await(absl::Duration timeout);

 private:
  const int fd_;
};

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_LOG_CAP_H_
