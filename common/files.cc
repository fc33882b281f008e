#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rsslab {
namespace {

const char* KindOf(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

absl::Status CheckStat(const struct stat& st, const std::string& path, int64_t max_bytes,
                       absl::string_view what) {
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", path, " is ", KindOf(st.st_mode), ", not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s is %d bytes; at most %d bytes are read for this kind of file", what, path,
        static_cast<int64_t>(st.st_size), max_bytes));
  }
  return absl::OkStatus();
}

// Opens without blocking (a FIFO with no writer would block a plain open)
// and without following the file into a terminal's control.
int OpenNoBlock(const std::string& path) {
  return open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
}

}  // namespace

absl::StatusOr<std::string> ReadFileBounded(const std::string& path, int64_t max_bytes,
                                            absl::string_view what) {
  int fd = OpenNoBlock(path);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat(what, ": cannot read ", path, ": ", strerror(errno)));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return absl::NotFoundError(absl::StrCat(what, ": cannot stat ", path, ": ", strerror(e)));
  }
  if (absl::Status s = CheckStat(st, path, max_bytes, what); !s.ok()) {
    close(fd);
    return s;
  }
  // The size can change between fstat and read (a file being written): read
  // at most one byte past the limit to notice, never more.
  std::string out;
  out.resize(static_cast<size_t>(std::min<int64_t>(st.st_size, max_bytes)) + 1);
  size_t got = 0;
  while (true) {
    if (got == out.size()) {
      if (static_cast<int64_t>(got) > max_bytes) break;
      out.resize(std::min<size_t>(out.size() * 2, static_cast<size_t>(max_bytes) + 1));
    }
    ssize_t n = read(fd, &out[got], out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return absl::NotFoundError(absl::StrCat(what, ": cannot read ", path, ": ", strerror(e)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (static_cast<int64_t>(got) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s is larger than %d bytes, the most read for this kind of file", what, path,
        max_bytes));
  }
  out.resize(got);
  return out;
}

absl::Status CheckRegularFile(const std::string& path, int64_t max_bytes, absl::string_view what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(what, ": cannot read ", path, ": ", strerror(errno)));
  }
  return CheckStat(st, path, max_bytes, what);
}

absl::Status CheckPrivateFile(const std::string& path, absl::string_view what) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(what, ": cannot read ", path, ": ", strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s: %s is accessible by its group or others (mode %04o); a secret must not be: "
        "chmod 600 %s",
        what, path, st.st_mode & 07777, path));
  }
  return absl::OkStatus();
}

}  // namespace rsslab
