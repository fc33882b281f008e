// The one line a server prints on stdout when it is ready to serve, so that
// scripts, the agent and rsslab_run wait for it instead of sleeping:
//
//   rsslab_server ready data=HOST:PORT control=HOST:PORT pid=PID [metrics=HOST:PORT]
//
// Usage:
//   printf("%s\n", rsslab::FormatReadyLine({"127.0.0.1:50051", "127.0.0.1:50052", getpid()}).c_str());
//   if (rsslab::IsReadyLine(line)) { auto r = rsslab::ParseReadyLine(line); ... }

#ifndef RSSLAB_COMMON_READY_LINE_H_
#define RSSLAB_COMMON_READY_LINE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {

// Every ready line starts with this (note the trailing space).
inline constexpr absl::string_view kReadyPrefix = "rsslab_server ready ";

struct ReadyLine {
  std::string data_address;
  std::string control_address;
  int pid = 0;
  std::string metrics_address;  // empty when the server exports no metrics
};

// The line without its newline.
std::string FormatReadyLine(const ReadyLine& r);

bool IsReadyLine(absl::string_view line);

// Parses a line made by FormatReadyLine; INVALID_ARGUMENT if a field is missing.
absl::StatusOr<ReadyLine> ParseReadyLine(absl::string_view line);

}  // namespace rsslab

#endif  // RSSLAB_COMMON_READY_LINE_H_
