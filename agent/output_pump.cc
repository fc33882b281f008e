#include "agent/output_pump.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <utility>

namespace rsslab {
namespace launch {

namespace {

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk must not stop the copy loop
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

OutputPump::OutputPump(int read_fd, int sink_fd, bool own_sink, LineMatch ready,
                       bool withhold_ready)
    : read_fd_(read_fd),
      sink_fd_(sink_fd),
      own_sink_(own_sink),
      ready_match_(std::move(ready)),
      withhold_(withhold_ready) {
  if (pipe2(wake_, O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
  thread_ = std::thread([this] { Run(); });
}

OutputPump::~OutputPump() {
  if (wake_[1] >= 0) {
    char c = 1;
    ssize_t ignored = write(wake_[1], &c, 1);
    (void)ignored;
  }
  thread_.join();
  close(read_fd_);
  if (own_sink_ && sink_fd_ >= 0) close(sink_fd_);
  if (wake_[0] >= 0) close(wake_[0]);
  if (wake_[1] >= 0) close(wake_[1]);
}

void OutputPump::Run() {
  std::string line;
  // Nothing to look for: only copy.
  bool seen_ready = ready_match_.empty();
  bool long_line = false;  // the current line's start was already copied
  constexpr size_t kMaxReadyLine = 64 << 10;
  char buf[4096];
  while (true) {
    pollfd fds[2] = {{read_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    int r = poll(fds, wake_[0] >= 0 ? 2 : 1, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (fds[1].revents & POLLIN)) break;
    ssize_t n = read(read_fd_, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    // Scan for the ready line until it has been seen; afterwards just copy.
    const char* p = buf;
    const char* end = buf + n;
    while (p < end) {
      if (seen_ready) {
        if (sink_fd_ >= 0) WriteAll(sink_fd_, p, end - p);
        break;
      }
      const char* nl = static_cast<const char*>(memchr(p, '\n', end - p));
      if (nl == nullptr) {
        line.append(p, end - p);
        // Bounded: a line this long is copied on and never taken for ready.
        if (line.size() > kMaxReadyLine) {
          if (sink_fd_ >= 0) WriteAll(sink_fd_, line.data(), line.size());
          line.clear();
          long_line = true;
        }
        break;
      }
      line.append(p, nl - p);
      const bool is_ready = !long_line && ready_match_.Matches(line);
      long_line = false;
      if (!(is_ready && withhold_) && sink_fd_ >= 0) {
        WriteAll(sink_fd_, line.data(), line.size());
        WriteAll(sink_fd_, "\n", 1);
      }
      if (is_ready) {
        seen_ready = true;
        absl::MutexLock l(&mu_);
        ready_ = true;
        line_ = line;
      }
      line.clear();
      p = nl + 1;
    }
  }
  if (!line.empty() && sink_fd_ >= 0) WriteAll(sink_fd_, line.data(), line.size());
  absl::MutexLock l(&mu_);
  eof_ = true;
}

OutputPump::Result OutputPump::WaitReady(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  auto done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return ready_ || eof_; };
  mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (ready_) return {kReady, line_};
  if (eof_) return {kEof, ""};
  return {kTimeout, ""};
}

bool OutputPump::WaitEof(absl::Duration timeout) {
  absl::MutexLock l(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&eof_), timeout);
}

}  // namespace launch
}  // namespace rsslab
