// One file of /proc/<pid>: as a std::string, or in private anonymous
// memory (MappedText, outside the malloc heap being measured). The readers
// a snapshot uses read through MappedText: smaps of a 64-thread process is
// ~0.6 MB, and a heap buffer that size would grow the heap being measured
// or, once freed from mmap, raise glibc's dynamic mmap threshold.
//
// Example:
//
//   absl::StatusOr<std::string> maps = rsslab::procfs::ReadProcFile(pid, "maps");
//   absl::StatusOr<rsslab::procfs::MappedText> t =
//       rsslab::procfs::MappedText::Read(0, "smaps");  // 0: this process
#ifndef RSSLAB_COMMON_PROCFS_PROC_FILE_H_
#define RSSLAB_COMMON_PROCFS_PROC_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rsslab {
namespace procfs {

// Returns the contents of /proc/<pid>/<name> (/proc/self/<name> for pid 0).
// `name` may contain slashes ("task/123/comm").
absl::StatusOr<std::string> ReadProcFile(int pid, absl::string_view name);

// The same contents in private anonymous memory (mmap, outside malloc),
// unmapped when the MappedText goes. Pages are only touched as written.
//   absl::StatusOr<MappedText> t = MappedText::Read(0, "smaps");
//   ClassifySmaps(t->view(), 0, &map);
class MappedText {
 public:
  static absl::StatusOr<MappedText> Read(int pid, absl::string_view name);
  MappedText() = default;
  ~MappedText();
  MappedText(MappedText&& other) noexcept;
  MappedText& operator=(MappedText&& other) noexcept;
  MappedText(const MappedText&) = delete;
  MappedText& operator=(const MappedText&) = delete;
  absl::string_view view() const { return absl::string_view(data_, size_); }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace procfs
}  // namespace rsslab

#endif  // RSSLAB_COMMON_PROCFS_PROC_FILE_H_
