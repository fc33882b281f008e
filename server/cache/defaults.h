// The cache limits the server starts with and its phases set when a request
// gives none: seed 000's 100 MB cache for fill, 10 MB for shrink. Beside the
// cache, because only the server (core and embedded runtime) uses them.
//
//   int64_t limit = rsslab::kDefaultFillCacheBytes;   // 100 MiB
#ifndef RSSLAB_SERVER_CACHE_DEFAULTS_H_
#define RSSLAB_SERVER_CACHE_DEFAULTS_H_

#include <cstdint>

namespace rsslab {

inline constexpr int64_t kDefaultFillCacheBytes = int64_t{100} << 20;
inline constexpr int64_t kDefaultShrinkCacheBytes = int64_t{10} << 20;

}  // namespace rsslab

#endif  // RSSLAB_SERVER_CACHE_DEFAULTS_H_
