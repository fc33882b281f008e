#include "common/procfs/proc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/procfs/internal/parse.h"

namespace rsslab {
namespace procfs {

using internal::ProcPath;
using internal::ProcPathInto;

namespace {

// First guess of a file's size: procfs reports st_size 0, so guessing well
// means one allocation instead of a chain of doublings.
size_t InitialCapacity(absl::string_view name) {
  if (absl::EndsWith(name, "smaps")) return 1 << 20;
  if (absl::EndsWith(name, "maps")) return 128 << 10;
  return 8 << 10;
}

}  // namespace

absl::StatusOr<std::string> ReadProcFile(int pid, absl::string_view name) {
  const std::string path = ProcPath(pid, name);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  std::string out;
  out.resize(InitialCapacity(name));
  size_t used = 0;
  while (true) {
    if (used == out.size()) out.resize(out.size() * 2);
    ssize_t n = read(fd, &out[used], out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(used);  // Shrinking keeps the capacity: no reallocation.
  return out;
}

absl::StatusOr<MappedText> MappedText::Read(int pid, absl::string_view name) {
  char path[128];
  ProcPathInto(pid, name, path, sizeof(path));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  // Generous virtual reservation (procfs reports st_size 0); only the
  // pages read into are ever touched, and mremap grows it if needed.
  MappedText t;
  size_t want = std::max<size_t>(InitialCapacity(name) * 4, 64 << 10);
  void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, "mmap");
  }
  t.data_ = static_cast<char*>(p);
  t.mapped_ = want;
  while (true) {
    if (t.size_ == t.mapped_) {
      void* q = mremap(t.data_, t.mapped_, t.mapped_ * 2, MREMAP_MAYMOVE);
      if (q == MAP_FAILED) {
        int err = errno;
        close(fd);
        return absl::ErrnoToStatus(err, "mremap");
      }
      t.data_ = static_cast<char*>(q);
      t.mapped_ *= 2;
    }
    ssize_t n = read(fd, t.data_ + t.size_, t.mapped_ - t.size_);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    t.size_ += static_cast<size_t>(n);
  }
  close(fd);
  return t;
}

MappedText::~MappedText() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

MappedText::MappedText(MappedText&& other) noexcept
    : data_(other.data_), size_(other.size_), mapped_(other.mapped_) {
  other.data_ = nullptr;
  other.size_ = other.mapped_ = 0;
}

MappedText& MappedText::operator=(MappedText&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    other.data_ = nullptr;
    other.size_ = other.mapped_ = 0;
  }
  return *this;
}

}  // namespace procfs
}  // namespace rsslab
