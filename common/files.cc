#include "common/files.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

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

// A temporary name beside `path` (same directory, so the rename is atomic),
// hidden, and unique per process and call so two writers never share one.
std::string TempNameFor(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return absl::StrCat(dir, ".", base, ".tmp-", getpid(), "-", counter.fetch_add(1));
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

absl::Status WriteFileAtomically(const std::string& path, absl::string_view text, mode_t mode) {
  const std::string tmp = TempNameFor(path);
  auto fail = [&](int e) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(e)));
  };
  // O_EXCL: never write through a file (or a symlink) someone left there.
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", strerror(errno)));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      close(fd);
      return fail(e);
    }
    done += static_cast<size_t>(n);
  }
  // fsync before rename: otherwise a crash can leave `path` renamed but empty.
  if (fsync(fd) != 0) {
    const int e = errno;
    close(fd);
    return fail(e);
  }
  if (close(fd) != 0) return fail(errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail(errno);
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string p = dir.substr(0, i);
    if (mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrFormat("cannot create %s: %s", p, strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace rsslab
