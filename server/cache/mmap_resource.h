// A std::pmr::memory_resource that takes its memory straight from mmap and
// gives it back with munmap: outside every malloc heap and arena, whichever
// allocator the process runs. The upstream of the cache's pool
// (lru_cache.h), which asks it for large chunks only.
//
// Example:
//   MmapResource chunks;
//   std::pmr::unsynchronized_pool_resource pool(&chunks);
//   std::pmr::list<int> l(&pool);

#ifndef RSSLAB_SERVER_CACHE_MMAP_RESOURCE_H_
#define RSSLAB_SERVER_CACHE_MMAP_RESOURCE_H_

#include <cstddef>
#include <memory_resource>

namespace rsslab {

class MmapResource : public std::pmr::memory_resource {
 private:
  // Page-aligned; alignments above a page are refused (std::bad_alloc),
  // as is a failed mmap.
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_CACHE_MMAP_RESOURCE_H_
