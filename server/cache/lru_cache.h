// A byte-bounded LRU cache shared by all worker threads.
//
// The cache is bounded by the total charge (bytes) of its entries, not by
// their number. It owns values of type V but never destroys them itself:
// every value that leaves the cache (evicted, replaced, erased, cleared) is
// handed back to the caller, who releases it outside the cache's lock. That
// is what lets the server keep Python objects here: dropping a reference
// needs the interpreter, and must not happen under the cache's own lock.
//
// Example:
//   LruCache<std::string> cache(/*limit_bytes=*/100 << 20);
//   std::vector<std::string> dropped;
//   cache.Put("k", "v", /*charge=*/1, &dropped);
//   std::string out;
//   cache.Get("k", [&](const std::string& v) { out = v; });
//   cache.Resize(10 << 20, &dropped);   // evicts at once
//
// Thread-safe: one absl::Mutex; correct without any interpreter lock.
//
// Where its own memory comes from: each entry's node and key are allocated
// from a pool of the cache's (memory_resource: chunks mmap'd outside the
// process's malloc heaps), as a Python cache's dict entries and keys live in
// pymalloc's arenas. From malloc they would sit between the bodies the
// handler allocates on the same thread, and under glibc every one left in
// the cache pins the free space around it: at 1 worker the server held 10
// MiB (+25-50 %) more free glibc memory after a shrink than a plain Python
// process with the same cache (docs/TESTING.md, "The server against a
// plain Python process"). The pool keeps its chunks until the cache goes
// (about 100 bytes per entry at the most entries it ever held).

#ifndef RSSLAB_SERVER_CACHE_LRU_CACHE_H_
#define RSSLAB_SERVER_CACHE_LRU_CACHE_H_

#include <cstdint>
#include <list>
#include <memory_resource>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/cache/mmap_resource.h"

namespace rsslab {

struct CacheCounters {
  int64_t entries = 0;
  int64_t bytes = 0;
  int64_t limit_bytes = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t puts = 0;
  int64_t evicted_bytes = 0;
};

template <typename V>
class LruCache {
 public:
  explicit LruCache(int64_t limit_bytes) : limit_(limit_bytes) {}
  LruCache(const LruCache&) = delete;
  LruCache& operator=(const LruCache&) = delete;

  // Inserts or replaces `key`. An entry whose charge exceeds the limit is not
  // kept (it is handed back at once) and Put returns false. Values that leave
  // the cache are appended to `dropped`.
  bool Put(absl::string_view key, V value, int64_t charge,
           std::vector<V>* dropped) {
    absl::MutexLock lock(&mu_);
    ++puts_;
    auto it = index_.find(key);
    if (it != index_.end()) {
      Entry& old = *it->second;
      bytes_ -= old.charge;
      dropped->push_back(std::move(old.value));
      lru_.erase(it->second);
      index_.erase(it);
    }
    if (charge > limit_) {
      dropped->push_back(std::move(value));
      return false;
    }
    lru_.push_front(Entry{std::pmr::string(key.data(), key.size(), &pool_), std::move(value), charge});
    index_.emplace(lru_.front().key, lru_.begin());
    bytes_ += charge;
    EvictLocked(dropped);
    return true;
  }

  // Calls `fn` with the value under the lock (so it can take a reference
  // before anyone can evict it) and marks the entry most recently used.
  template <typename Fn>
  bool Get(absl::string_view key, Fn&& fn) {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) {
      ++misses_;
      return false;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    fn(it->second->value);
    return true;
  }

  bool Erase(absl::string_view key, std::vector<V>* dropped) {
    absl::MutexLock lock(&mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return false;
    bytes_ -= it->second->charge;
    dropped->push_back(std::move(it->second->value));
    lru_.erase(it->second);
    index_.erase(it);
    return true;
  }

  // Changes the limit; shrinking evicts least recently used entries at once.
  void Resize(int64_t limit_bytes, std::vector<V>* dropped) {
    absl::MutexLock lock(&mu_);
    limit_ = limit_bytes;
    EvictLocked(dropped);
  }

  void Clear(std::vector<V>* dropped) {
    absl::MutexLock lock(&mu_);
    for (Entry& e : lru_) dropped->push_back(std::move(e.value));
    lru_.clear();
    index_.clear();
    bytes_ = 0;
  }

  CacheCounters Counters() const {
    absl::MutexLock lock(&mu_);
    CacheCounters c;
    c.entries = static_cast<int64_t>(index_.size());
    c.bytes = bytes_;
    c.limit_bytes = limit_;
    c.hits = hits_;
    c.misses = misses_;
    c.evictions = evictions_;
    c.puts = puts_;
    c.evicted_bytes = evicted_bytes_;
    return c;
  }

  // Keys from most to least recently used (for tests and debugging).
  std::vector<std::string> KeysByRecency() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> keys;
    keys.reserve(lru_.size());
    for (const Entry& e : lru_) keys.push_back(std::string(e.key));
    return keys;
  }

 private:
  struct Entry {
    std::pmr::string key;
    V value;
    int64_t charge;
  };

  void EvictLocked(std::vector<V>* dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (bytes_ > limit_ && !lru_.empty()) {
      Entry& victim = lru_.back();
      bytes_ -= victim.charge;
      evicted_bytes_ += victim.charge;
      ++evictions_;
      dropped->push_back(std::move(victim.value));
      index_.erase(victim.key);
      lru_.pop_back();
    }
  }

  mutable absl::Mutex mu_;
  int64_t limit_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t puts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evicted_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The entries' nodes and keys (see the top); used under mu_ only. Declared
  // before lru_ and index_, so destroyed after the entries they hold.
  MmapResource chunks_;
  std::pmr::unsynchronized_pool_resource pool_ ABSL_GUARDED_BY(mu_){&chunks_};
  // Most recently used first. The index's keys view the entries' own keys.
  std::pmr::list<Entry> lru_ ABSL_GUARDED_BY(mu_){&pool_};
  absl::flat_hash_map<absl::string_view, typename std::pmr::list<Entry>::iterator>
      index_ ABSL_GUARDED_BY(mu_);
};

}  // namespace rsslab

#endif  // RSSLAB_SERVER_CACHE_LRU_CACHE_H_
