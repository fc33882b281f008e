// The server's shared LRU cache, holding Python objects, and its Python face.
//
// Values are Python objects (so cached bodies stay allocated by CPython,
// where a real service's would be). The C++ LruCache does the bounding under
// its own lock; references are taken under that lock and dropped outside it,
// with this thread attached to the interpreter. That keeps it correct on a
// free-threaded CPython too, where no GIL serialises callers.
//
// From Python (`import rsslab.cache as cache`, also the handler's 2nd arg):
//   cache.put(key, value, size=None) -> bool   # size defaults to len(bytes)
//   cache.get(key) -> value | None
//   cache.delete(key) -> bool
//   cache.resize(limit_bytes)                 # evicts at once when smaller
//   cache.stats() -> dict(entries, bytes, limit_bytes, hits, misses, ...)

#ifndef RSSLAB_SERVER_PYTHON_PY_CACHE_H_
#define RSSLAB_SERVER_PYTHON_PY_CACHE_H_

#include <Python.h>

#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/cache/lru_cache.h"

namespace rsslab {

class PyCache {
 public:
  explicit PyCache(int64_t limit_bytes) : cache_(limit_bytes) {}

  // The methods below that can drop references need an attached thread
  // state (the GIL on a GIL build).
  bool Put(absl::string_view key, PyObject* value, int64_t charge);
  PyObject* Get(absl::string_view key);  // new reference or nullptr
  bool Delete(absl::string_view key);
  void Resize(int64_t limit_bytes);
  void Clear();

  // Needs no interpreter: bounds the cache to `limit_bytes` now and hands
  // the evicted entries' references to the caller, who drops them with
  // Release once attached (a handler may hold the GIL meanwhile).
  void ResizeKeeping(int64_t limit_bytes, std::vector<PyObject*>* dropped) {
    cache_.Resize(limit_bytes, dropped);
  }
  CacheCounters Counters() const { return cache_.Counters(); }

  // Drops the references and clears `dropped`; needs an attached thread
  // state.
  static void Release(std::vector<PyObject*>* dropped);

 private:
  LruCache<PyObject*> cache_;
};

// Registers the built-in module `rsslab` (with submodule `rsslab.cache`)
// backed by `cache`. Call before the interpreter starts.
void RegisterCacheModule(PyCache* cache);

// The `rsslab.cache` module object (new reference); the interpreter must be
// running and the module registered.
PyObject* ImportCacheModule();

}  // namespace rsslab

#endif  // RSSLAB_SERVER_PYTHON_PY_CACHE_H_
