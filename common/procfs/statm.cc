// StatmRssBytes (status.h): apart from status.cc's parser, as it reads
// only its own process's one line.

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "common/procfs/status.h"

namespace rsslab {
namespace procfs {

int64_t StatmRssBytes() {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  long long size = 0, resident = 0;  // NOLINT(runtime/int)
  if (sscanf(buf, "%lld %lld", &size, &resident) != 2) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

}  // namespace procfs
}  // namespace rsslab
