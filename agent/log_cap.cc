#include "agent/log_cap.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace rsslab {
namespace launch {
namespace {

constexpr char kWriterFlag[] = "--rsslab_log_writer=";

std::string PRead(int fd, int64_t offset, int64_t len) {
  std::string out(static_cast<size_t>(len), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = pread(fd, out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  out.resize(got);
  return out;
}

std::string Mib(int64_t bytes) {
  return bytes % (1 << 20) == 0 ? absl::StrCat(bytes >> 20, " MiB") : absl::StrCat(bytes, " bytes");
}

}  // namespace

absl::StatusOr<std::unique_ptr<CappedLog>> CappedLog::Open(const std::string& path,
                                                           int64_t max_bytes) {
  if (max_bytes < kMinLogCapBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("log cap ", max_bytes, " bytes is below the minimum of ", kMinLogCapBytes));
  }
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot open log ", path, ": ", strerror(errno)));
  const off_t size = lseek(fd, 0, SEEK_END);
  return std::unique_ptr<CappedLog>(new CappedLog(fd, size < 0 ? 0 : size, max_bytes));
}

CappedLog::CappedLog(int fd, int64_t size, int64_t max_bytes)
    : fd_(fd), size_(size), max_bytes_(max_bytes) {}

CappedLog::~CappedLog() { close(fd_); }

void CappedLog::Write(int64_t offset, absl::string_view data) {
  while (!data.empty()) {
    ssize_t w = pwrite(fd_, data.data(), data.size(), offset);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // a full disk: lost, the copy goes on
    data.remove_prefix(static_cast<size_t>(w));
    offset += w;
  }
}

void CappedLog::Append(absl::string_view data) {
  // In pieces no larger than one pipe read: Cut's arithmetic relies on it.
  while (!data.empty()) {
    absl::string_view piece = data.substr(0, kLogWriterChunk);
    data.remove_prefix(piece.size());
    if (size_ + static_cast<int64_t>(piece.size()) > max_bytes_) {
      Cut(piece);
    } else {
      Write(size_, piece);
      size_ += static_cast<int64_t>(piece.size());
    }
  }
}

// Rewrites the log in place as head, marker, the last quarter of the cap of
// what came after the head (the file's end, then `incoming`). The kept tail
// starts at least 3/4 of the cap minus one piece into the file, well past
// where the marker ends, so copying it forward never overwrites what is
// still to be copied.
void CappedLog::Cut(absl::string_view incoming) {
  const int64_t quarter = max_bytes_ / 4;
  if (head_len_ < 0) {
    const std::string head = PRead(fd_, 0, std::min(quarter, size_));
    const size_t nl = head.rfind('\n');
    head_len_ = nl == std::string::npos ? static_cast<int64_t>(head.size()) : nl + 1;
    marker_len_ = 0;
  }
  const int64_t in = static_cast<int64_t>(incoming.size());
  const int64_t body_start = head_len_ + marker_len_;
  const int64_t body_len = size_ - body_start + in;
  const int64_t keep = std::min(quarter, body_len);
  const int64_t from_file = std::max<int64_t>(0, keep - in);
  const int64_t src = size_ - from_file;  // the kept tail's first byte in the file
  absl::string_view in_kept = incoming.substr(static_cast<size_t>(in - (keep - from_file)));

  // Start the tail at a line's start: skip a partial first line (if a
  // newline follows within the kept bytes).
  int64_t skip = 0;
  const std::string before =
      from_file > 0 ? PRead(fd_, src - 1, 1)
      : in_kept.size() < incoming.size()
          ? std::string(1, incoming[incoming.size() - in_kept.size() - 1])
          : PRead(fd_, size_ - 1, 1);
  if (before != "\n") {
    const std::string file_part = PRead(fd_, src, std::min<int64_t>(from_file, 64 << 10));
    size_t nl = file_part.find('\n');
    if (nl != std::string::npos) {
      skip = static_cast<int64_t>(nl) + 1;
    } else if (from_file <= static_cast<int64_t>(file_part.size())) {
      nl = in_kept.find('\n');
      if (nl != absl::string_view::npos) skip = from_file + static_cast<int64_t>(nl) + 1;
    }
    if (skip >= keep) skip = 0;  // nothing would be left: keep the partial line
  }
  dropped_ += body_len - (keep - skip);

  const bool head_ends_line = head_len_ == 0 || PRead(fd_, head_len_ - 1, 1) == "\n";
  const std::string marker =
      absl::StrCat(head_ends_line ? "" : "\n", kDroppedMarker, dropped_,
                   " bytes of output dropped here (log capped at ", Mib(max_bytes_), ")\n");
  int64_t dst = head_len_;
  Write(dst, marker);
  dst += static_cast<int64_t>(marker.size());
  int64_t from = src + std::min(skip, from_file);
  if (from >= dst) {
    std::string buf;
    while (from < size_) {
      buf = PRead(fd_, from, std::min<int64_t>(size_ - from, 1 << 20));
      if (buf.empty()) break;
      Write(dst, buf);
      from += static_cast<int64_t>(buf.size());
      dst += static_cast<int64_t>(buf.size());
    }
  }
  if (skip > from_file) in_kept.remove_prefix(static_cast<size_t>(skip - from_file));
  Write(dst, in_kept);
  dst += static_cast<int64_t>(in_kept.size());
  if (ftruncate(fd_, dst) != 0) {
    // The old bytes past dst stay; the next append writes over them.
  }
  size_ = dst;
  marker_len_ = static_cast<int64_t>(marker.size());
}

std::vector<std::string> LogWriterArgs(const std::string& path, int64_t max_bytes) {
  return {absl::StrCat(kWriterFlag, max_bytes), path};
}

bool RunLogWriterIfAsked(int argc, char** argv, int* rc) {
  if (argc != 3 || !absl::StartsWith(argv[1], kWriterFlag)) return false;
  prctl(PR_SET_NAME, "rsslab_logcap");
  int64_t max_bytes = 0;
  absl::StatusOr<std::unique_ptr<CappedLog>> log =
      absl::SimpleAtoi(argv[1] + strlen(kWriterFlag), &max_bytes)
          ? CappedLog::Open(argv[2], max_bytes)
          : absl::InvalidArgumentError(absl::StrCat("bad ", argv[1]));
  if (!log.ok()) {
    fprintf(stderr, "rsslab log writer: %s\n", std::string(log.status().message()).c_str());
  }
  // Read to the end whatever happens: the program must never block on, or
  // get EPIPE from, its output.
  std::string buf(kLogWriterChunk, '\0');
  while (true) {
    ssize_t n = read(0, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (log.ok()) (*log)->Append(absl::string_view(buf.data(), static_cast<size_t>(n)));
  }
  *rc = log.ok() ? 0 : 1;
  return true;
}

LogWriterDone::~LogWriterDone() { close(fd_); }

bool LogWriterDone::Await(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    pollfd p = {fd_, POLLIN, 0};
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    // The writer never writes to its stdout: readable or hung up means it
    // has closed it, by exiting.
    return r > 0;
  }
}

}  // namespace launch
}  // namespace rsslab
