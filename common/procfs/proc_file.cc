#include "common/procfs/proc_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/functional/function_ref.h"
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

// A buffer being filled: where, how much it holds, how much fits.
struct Fill {
  char* data;
  size_t size;
  size_t capacity;
};

// Reads fd to its end into *f, calling grow(f) whenever f is full (it
// enlarges the buffer or returns the error); closes fd. Allocates nothing
// itself, so the caller's buffer decides where the text lives.
absl::Status ReadToEnd(int fd, const char* path, Fill* f,
                       absl::FunctionRef<absl::Status(Fill*)> grow) {
  while (true) {
    if (f->size == f->capacity) {
      absl::Status s = grow(f);
      if (!s.ok()) {
        close(fd);
        return s;
      }
    }
    ssize_t n = read(fd, f->data + f->size, f->capacity - f->size);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    f->size += static_cast<size_t>(n);
  }
  close(fd);
  return absl::OkStatus();
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
  Fill f{&out[0], 0, out.size()};
  absl::Status s = ReadToEnd(fd, path.c_str(), &f, [&out](Fill* f) {
    out.resize(out.size() * 2);
    f->data = &out[0];
    f->capacity = out.size();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  out.resize(f.size);  // Shrinking keeps the capacity: no reallocation.
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
  Fill f{t.data_, 0, t.mapped_};
  absl::Status s = ReadToEnd(fd, path, &f, [&t](Fill* f) -> absl::Status {
    void* q = mremap(t.data_, t.mapped_, t.mapped_ * 2, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) return absl::ErrnoToStatus(errno, "mremap");
    t.data_ = static_cast<char*>(q);
    t.mapped_ *= 2;
    f->data = t.data_;
    f->capacity = t.mapped_;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  t.size_ = f.size;
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
