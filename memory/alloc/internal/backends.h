// One constructor per allocator backend, called once by detection
// (Allocator::Get in alloc.cc) for the allocator that serves malloc.
//
// Example:
//
//   std::unique_ptr<rsslab::alloc::Allocator> a =
//       rsslab::alloc::internal::NewJemalloc({"jemalloc", "/usr/lib/.../libjemalloc.so.2", ""});
#ifndef RSSLAB_MEMORY_ALLOC_INTERNAL_BACKENDS_H_
#define RSSLAB_MEMORY_ALLOC_INTERNAL_BACKENDS_H_

#include <memory>

#include "memory/alloc/alloc.h"

namespace rsslab {
namespace alloc {
namespace internal {

std::unique_ptr<Allocator> NewGlibc(Allocator::Identity id);     // glibc.cc
std::unique_ptr<Allocator> NewJemalloc(Allocator::Identity id);  // jemalloc.cc
std::unique_ptr<Allocator> NewTcmalloc(Allocator::Identity id);  // tcmalloc.cc
// Reads mi_version and picks the 2.x backend (mimalloc2.cc), the 3.x one
// (mimalloc3.cc), or, for a version rsslab has not read, the part both
// share (mimalloc.cc), which refuses every version-specific figure.
std::unique_ptr<Allocator> NewMimalloc(Allocator::Identity id);  // mimalloc.cc

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_INTERNAL_BACKENDS_H_
