#include "server/cache/mmap_resource.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace rsslab {
namespace {

std::size_t PageRounded(std::size_t bytes) {
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

void* MmapResource::do_allocate(std::size_t bytes, std::size_t alignment) {
  if (alignment > static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) throw std::bad_alloc();
  void* p = mmap(nullptr, PageRounded(bytes == 0 ? 1 : bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return p;
}

void MmapResource::do_deallocate(void* p, std::size_t bytes, std::size_t) {
  munmap(p, PageRounded(bytes == 0 ? 1 : bytes));
}

}  // namespace rsslab
