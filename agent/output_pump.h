// A child's stdout copied on a thread of its own, its ready line spotted:
// what a launcher waits on after Spawn (spawn.h).
//
// Example:
//   rsslab::launch::OutputPump pump(out[0], /*sink_fd=*/log_fd, /*own_sink=*/true,
//                                   rsslab::launch::LineMatch::Prefix(rsslab::kReadyPrefix),
//                                   /*withhold_ready=*/false);
//   rsslab::launch::OutputPump::Result r = pump.WaitReady(absl::Seconds(60));
//   if (r.state == rsslab::launch::OutputPump::kReady) { auto rl = rsslab::ParseReadyLine(r.line); }
#ifndef RSSLAB_AGENT_OUTPUT_PUMP_H_
#define RSSLAB_AGENT_OUTPUT_PUMP_H_

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/readiness.h"

namespace rsslab {
namespace launch {

// Copies a child's stdout (a pipe) to `sink_fd` on its own thread and
// recognises the ready line. Reads until EOF (the child exited or closed
// stdout), so the child never blocks on a full pipe or gets SIGPIPE.
class OutputPump {
 public:
  enum State { kWaiting, kReady, kEof, kTimeout };
  struct Result {
    State state;
    std::string line;  // the ready line, without '\n'
  };

  // Takes ownership of read_fd (and sink_fd if own_sink). sink_fd -1 drops
  // the output. `ready` says which line is the ready line (empty: none,
  // the output is only copied). With withhold_ready, the ready line is not
  // copied: the caller prints it once it has verified the process.
  OutputPump(int read_fd, int sink_fd, bool own_sink, LineMatch ready, bool withhold_ready);
  ~OutputPump();  // stops copying and joins, even if the child still runs
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Until the ready line, EOF, or the timeout.
  Result WaitReady(absl::Duration timeout);
  // Until EOF (or timeout); true at EOF.
  bool WaitEof(absl::Duration timeout);

 private:
  void Run();

  int read_fd_;
  int sink_fd_;
  bool own_sink_;
  int wake_[2] = {-1, -1};
  const LineMatch ready_match_;
  const bool withhold_;
  absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  std::string line_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace launch
}  // namespace rsslab

#endif  // RSSLAB_AGENT_OUTPUT_PUMP_H_
