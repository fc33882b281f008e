#include "server/cache/lru_cache.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace rsslab {
namespace {

using Cache = LruCache<std::string>;

TEST(LruCacheTest, CountsBytesAndEntries) {
  Cache cache(100);
  std::vector<std::string> dropped;
  EXPECT_TRUE(cache.Put("a", "A", 30, &dropped));
  EXPECT_TRUE(cache.Put("b", "B", 40, &dropped));
  CacheCounters c = cache.Counters();
  EXPECT_EQ(c.entries, 2);
  EXPECT_EQ(c.bytes, 70);
  EXPECT_EQ(c.limit_bytes, 100);
  EXPECT_EQ(c.puts, 2u);
  EXPECT_TRUE(dropped.empty());
}

TEST(LruCacheTest, EvictsLeastRecentlyUsedFirst) {
  Cache cache(100);
  std::vector<std::string> dropped;
  cache.Put("a", "A", 40, &dropped);
  cache.Put("b", "B", 40, &dropped);
  std::string seen;
  ASSERT_TRUE(cache.Get("a", [&](const std::string& v) { seen = v; }));
  EXPECT_EQ(seen, "A");
  cache.Put("c", "C", 40, &dropped);  // over the limit: "b" is the oldest
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0], "B");
  EXPECT_EQ(cache.KeysByRecency(), (std::vector<std::string>{"c", "a"}));
  CacheCounters c = cache.Counters();
  EXPECT_EQ(c.evictions, 1u);
  EXPECT_EQ(c.evicted_bytes, 40);
  EXPECT_EQ(c.bytes, 80);
}

TEST(LruCacheTest, HitsAndMisses) {
  Cache cache(100);
  std::vector<std::string> dropped;
  cache.Put("a", "A", 1, &dropped);
  EXPECT_TRUE(cache.Get("a", [](const std::string&) {}));
  EXPECT_FALSE(cache.Get("zz", [](const std::string&) {}));
  EXPECT_FALSE(cache.Get("zz", [](const std::string&) {}));
  CacheCounters c = cache.Counters();
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.misses, 2u);
}

TEST(LruCacheTest, ReplacingAKeyHandsBackTheOldValue) {
  Cache cache(100);
  std::vector<std::string> dropped;
  cache.Put("a", "old", 10, &dropped);
  cache.Put("a", "new", 20, &dropped);
  ASSERT_EQ(dropped, std::vector<std::string>{"old"});
  EXPECT_EQ(cache.Counters().bytes, 20);
  EXPECT_EQ(cache.Counters().entries, 1);
  EXPECT_EQ(cache.Counters().evictions, 0u);
}

TEST(LruCacheTest, OversizedEntryIsNotKept) {
  Cache cache(100);
  std::vector<std::string> dropped;
  cache.Put("small", "s", 10, &dropped);
  EXPECT_FALSE(cache.Put("huge", "h", 101, &dropped));
  EXPECT_EQ(dropped, std::vector<std::string>{"h"});
  EXPECT_EQ(cache.Counters().entries, 1);  // the small one survives
}

TEST(LruCacheTest, ResizeDownEvictsImmediatelyInLruOrder) {
  Cache cache(1000);
  std::vector<std::string> dropped;
  for (int i = 0; i < 10; ++i) {
    cache.Put(std::to_string(i), "v" + std::to_string(i), 100, &dropped);
  }
  ASSERT_TRUE(dropped.empty());
  cache.Resize(250, &dropped);
  EXPECT_EQ(dropped.size(), 8u);
  EXPECT_EQ(dropped.front(), "v0");  // oldest first
  EXPECT_EQ(cache.KeysByRecency(), (std::vector<std::string>{"9", "8"}));
  CacheCounters c = cache.Counters();
  EXPECT_EQ(c.bytes, 200);
  EXPECT_LE(c.bytes, c.limit_bytes);
  EXPECT_EQ(c.limit_bytes, 250);
  // Growing again evicts nothing.
  dropped.clear();
  cache.Resize(10000, &dropped);
  EXPECT_TRUE(dropped.empty());
}

TEST(LruCacheTest, ResizeToZeroEmptiesAndClearReturnsAll) {
  Cache cache(1000);
  std::vector<std::string> dropped;
  cache.Put("a", "A", 1, &dropped);
  cache.Put("b", "B", 1, &dropped);
  cache.Clear(&dropped);
  EXPECT_EQ(dropped.size(), 2u);
  EXPECT_EQ(cache.Counters().entries, 0);
  EXPECT_EQ(cache.Counters().bytes, 0);
}

TEST(LruCacheTest, EraseReturnsValue) {
  Cache cache(1000);
  std::vector<std::string> dropped;
  cache.Put("a", "A", 7, &dropped);
  EXPECT_TRUE(cache.Erase("a", &dropped));
  EXPECT_FALSE(cache.Erase("a", &dropped));
  EXPECT_EQ(dropped, std::vector<std::string>{"A"});
  EXPECT_EQ(cache.Counters().bytes, 0);
}

// Many threads putting, getting and resizing: the byte count must stay exact
// and within the limit, and every value must come back exactly once.
TEST(LruCacheTest, ConcurrentUseKeepsAccountingExact) {
  LruCache<std::shared_ptr<int>> cache(5000);
  constexpr int kThreads = 8;
  constexpr int kOps = 20000;
  std::vector<std::thread> threads;
  std::vector<std::vector<std::shared_ptr<int>>> dropped(kThreads);
  std::vector<std::shared_ptr<int>> all;
  all.reserve(kThreads * kOps);
  for (int i = 0; i < kThreads * kOps; ++i) all.push_back(std::make_shared<int>(i));
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kOps; ++i) {
        int n = t * kOps + i;
        cache.Put("k" + std::to_string(n % 997), all[n], 1 + n % 50, &dropped[t]);
        cache.Get("k" + std::to_string((n * 7) % 997), [](const std::shared_ptr<int>&) {});
        if (i % 5000 == 0) cache.Resize(2000 + (i % 3) * 1500, &dropped[t]);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<std::shared_ptr<int>> rest;
  CacheCounters before = cache.Counters();
  EXPECT_LE(before.bytes, before.limit_bytes);
  cache.Clear(&rest);
  size_t returned = rest.size();
  for (auto& d : dropped) returned += d.size();
  // Every Put's value came back exactly once (evicted, replaced or cleared).
  EXPECT_EQ(returned, static_cast<size_t>(kThreads * kOps));
  EXPECT_EQ(before.entries, static_cast<int64_t>(rest.size()));
  // Once the caller drops what it was handed, nothing else holds a value.
  rest.clear();
  dropped.clear();
  for (auto& p : all) ASSERT_EQ(p.use_count(), 1) << "value still referenced";
  EXPECT_EQ(before.hits + before.misses, static_cast<uint64_t>(kThreads * kOps));
}

}  // namespace
}  // namespace rsslab
