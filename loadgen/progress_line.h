// Progress on stderr while a run goes: a line per finished step, and on a
// terminal the live line of the running load step, rewritten in place.
//
//   rsslab::PrintProgressLine(mode, "[1/10] fill: set_phase ok");
//   {
//     rsslab::ProgressLine live("1/10", "fill", [&] { return engine.Progress(); },
//                               [&] { return ServerRssMib(); });   // or nullptr
//     engine.Run(...);
//   }  // the live line stops; the step's line replaces it
//
//   [1/10] fill  51234/96000 done  8123 qps  p99 2.31 ms  errors 0  server rss 88.1 MiB
#ifndef RSSLAB_LOADGEN_PROGRESS_LINE_H_
#define RSSLAB_LOADGEN_PROGRESS_LINE_H_

#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "loadgen/engine.h"

namespace rsslab {

// --progress: nothing, a line per step, or those plus the live line.
enum class ProgressMode { kNone, kLines, kLive };

// One finished line on stderr (none for kNone); with kLive it first clears
// the live line it replaces.
void PrintProgressLine(ProgressMode mode, const std::string& text);

// The live line of one running load step, updated on its own thread until
// destroyed: requests done, QPS since the last update, p99 so far, errors,
// and the server's RSS when it answers.
class ProgressLine {
 public:
  // The engine's progress now.
  using ProgressFn = std::function<LiveProgress()>;
  // The server's RSS in MiB, negative when it did not answer (the line
  // keeps the last answer). Called at most once per Options::rss_period.
  using RssFn = std::function<double()>;
  struct Options {
    absl::Duration period = absl::Milliseconds(500);
    absl::Duration rss_period = absl::Seconds(2);
    FILE* out = stderr;
    // The terminal's width in columns, 0 when unknown; asked before every
    // update so a resize is followed. Default: stderr's terminal.
    std::function<int()> width;
  };

  // Starts updating at once. `rss` may be null (no control service).
  ProgressLine(std::string label, std::string name, ProgressFn progress, RssFn rss,
               Options options);
  ProgressLine(std::string label, std::string name, ProgressFn progress, RssFn rss)
      : ProgressLine(std::move(label), std::move(name), std::move(progress),
                     std::move(rss), Options()) {}
  // Stops updating; the line stays on screen until the next line clears it.
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // One line's text for `p`, cut to width - 1 columns (when width > 1): a
  // line wider than the terminal wraps, and "\r" then only returns to the
  // start of its last row, so every update would leave a stale row behind.
  static std::string Format(const std::string& label, const std::string& name,
                            const LiveProgress& p, double qps, double rss_mib, int width);

 private:
  void Loop();

  const std::string label_;
  const std::string name_;
  const ProgressFn progress_;
  const RssFn rss_;
  const Options options_;
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_PROGRESS_LINE_H_
