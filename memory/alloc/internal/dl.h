// The lookups every backend makes: an allocator function found with
// dlsym(RTLD_DEFAULT, ...) (never linked), and the Release a call reports
// when its function was not found.
//
// Example:
//
//   std::string missing;
//   int (*mallctl)(const char*, void*, size_t*, void*, size_t) = nullptr;
//   rsslab::alloc::internal::Resolve("mallctl", &mallctl, &missing);
//   if (mallctl == nullptr) return rsslab::alloc::internal::NotFound("mallctl");
#ifndef RSSLAB_MEMORY_ALLOC_INTERNAL_DL_H_
#define RSSLAB_MEMORY_ALLOC_INTERNAL_DL_H_

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "memory/alloc/alloc.h"

namespace rsslab {
namespace alloc {
namespace internal {

// *fn = dlsym(RTLD_DEFAULT, symbol); appends the symbol to *missing when
// absent.
template <typename Fn>
void Resolve(const char* symbol, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, symbol));
  if (*fn == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", symbol);
}

// "none (<symbol> not found)", ret -1.
inline Allocator::Release NotFound(const char* symbol) {
  return {absl::StrCat("none (", symbol, " not found)"), -1};
}

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab

#endif  // RSSLAB_MEMORY_ALLOC_INTERNAL_DL_H_
