#include "loadgen/progress_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace rsslab {
namespace {

int StderrWidth() {
  winsize ws{};
  return ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

}  // namespace

void PrintProgressLine(ProgressMode mode, const std::string& text) {
  if (mode == ProgressMode::kNone) return;
  fprintf(stderr, "%s%s\n", mode == ProgressMode::kLive ? "\r\033[K" : "", text.c_str());
  fflush(stderr);
}

ProgressLine::ProgressLine(std::string label, std::string name, ProgressFn progress,
                           RssFn rss, Options options)
    : label_(std::move(label)),
      name_(std::move(name)),
      progress_(std::move(progress)),
      rss_(std::move(rss)),
      options_(std::move(options)) {
  thread_ = std::thread([this] { Loop(); });
}

ProgressLine::~ProgressLine() {
  done_.Notify();
  thread_.join();
}

std::string ProgressLine::Format(const std::string& label, const std::string& name,
                                 const LiveProgress& p, double qps, double rss_mib,
                                 int width) {
  std::string text = absl::StrFormat(
      "[%s] %s  %d%s done  %.0f qps  p99 %.2f ms  errors %d  server rss %s", label, name,
      p.done, p.target ? absl::StrFormat("/%d", p.target) : "", qps, p.p99_us / 1000,
      p.failed, rss_mib < 0 ? "-" : absl::StrFormat("%.1f MiB", rss_mib));
  if (width > 1 && text.size() >= static_cast<size_t>(width)) text.resize(width - 1);
  return text;
}

void ProgressLine::Loop() {
  uint64_t last_done = 0;
  absl::Time last = absl::Now();
  absl::Time last_rss_at = absl::InfinitePast();
  double rss_mib = -1;
  while (!done_.WaitForNotificationWithTimeout(options_.period)) {
    if (rss_ != nullptr && absl::Now() - last_rss_at > options_.rss_period) {
      if (const double r = rss_(); r >= 0) rss_mib = r;
      last_rss_at = absl::Now();
    }
    const LiveProgress p = progress_();
    // Not started yet (connecting) or already over: the engine has no run
    // to show, and a "0 done" line would go backwards.
    if (!p.running) continue;
    const absl::Time now = absl::Now();
    const double qps =
        p.done >= last_done ? (p.done - last_done) / absl::ToDoubleSeconds(now - last) : 0;
    last_done = p.done;
    last = now;
    const int width = options_.width ? options_.width() : StderrWidth();
    fprintf(options_.out, "\r\033[K%s",
            Format(label_, name_, p, qps, rss_mib, width).c_str());
    fflush(options_.out);
  }
}

}  // namespace rsslab
