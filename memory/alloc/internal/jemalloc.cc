// jemalloc: figures and releases through mallctl. Stats are a snapshot taken
// at the last "epoch" bump, so every read bumps it first.
#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/alloc/alloc.h"
#include "memory/alloc/internal/backends.h"
#include "memory/alloc/internal/dl.h"

namespace rsslab {
namespace alloc {
namespace internal {

// jemalloc's MALLCTL_ARENAS_ALL: "arena.4096.*" addresses every arena.
constexpr const char* kPurgeAll = "arena.4096.purge";

class Jemalloc final : public Allocator {
 public:
  explicit Jemalloc(Identity id) : Allocator(std::move(id)) {
    std::string unresolved;
    Resolve("mallctl", &mallctl_, &unresolved);
    NoteUnresolved(unresolved);
  }

  std::string Version() const override {
    const char* version = nullptr;
    return Read("version", &version) && version != nullptr ? version : "";
  }

  int64_t ResidentBytes() const override { return EpochSize("stats.resident"); }
  int64_t AllocatedBytes() const override { return EpochSize("stats.allocated"); }

  std::string ArenaCountHint() const override {
    return "jemalloc's arena count is MALLOC_CONF=narenas:N, set before start";
  }

  Release ReleaseGlobal() const override {
    if (mallctl_ == nullptr) return NotFound("mallctl");
    int ret = mallctl_(kPurgeAll, nullptr, nullptr, nullptr, 0);
    Epoch();  // so the next stats read sees the purge
    return {absl::StrCat("mallctl(", kPurgeAll, ")"), ret};
  }

  Release ReleaseThisThread() const override {
    if (mallctl_ == nullptr) return NotFound("mallctl");
    return {"mallctl(thread.tcache.flush)",
            mallctl_("thread.tcache.flush", nullptr, nullptr, nullptr, 0)};
  }

  // The flushed caches' objects went back to their arenas: purge them all once.
  Release ReleaseAfterThreads() const override { return ReleaseGlobal(); }

 protected:
  void FillOwnStats(rsslab::v1::AllocatorStats* out) const override;
  void FillOwnThreadStats(rsslab::v1::ThreadAllocStats* out) const override;

 private:
  // mallctl(key) read into *v; false if it failed (or mallctl is missing).
  template <typename T>
  bool Read(const char* key, T* v) const {
    size_t len = sizeof(*v);
    return mallctl_ != nullptr && mallctl_(key, v, &len, nullptr, 0) == 0;
  }
  void Epoch() const {
    uint64_t epoch = 1;
    size_t len = sizeof(epoch);
    mallctl_("epoch", &epoch, &len, &epoch, len);
  }
  // A size_t statistic after an epoch bump; -1 if unavailable.
  int64_t EpochSize(const char* key) const {
    if (mallctl_ == nullptr) return -1;
    Epoch();
    size_t v = 0;
    return Read(key, &v) ? static_cast<int64_t>(v) : -1;
  }

  int (*mallctl_)(const char*, void*, size_t*, void*, size_t) = nullptr;
};

void Jemalloc::FillOwnStats(rsslab::v1::AllocatorStats* out) const {
  if (mallctl_ == nullptr) return;
  Epoch();  // stats.* are a snapshot taken at the last epoch bump
  rsslab::v1::JemallocStats* j = out->mutable_jemalloc();
  std::string failed;
  auto get_size = [&](const char* key) -> int64_t {
    size_t v = 0;
    if (!Read(key, &v)) {
      absl::StrAppend(&failed, failed.empty() ? "" : ", ", key);
      return 0;
    }
    return static_cast<int64_t>(v);
  };
  j->set_allocated(get_size("stats.allocated"));
  j->set_active(get_size("stats.active"));
  j->set_resident(get_size("stats.resident"));
  j->set_mapped(get_size("stats.mapped"));
  j->set_retained(get_size("stats.retained"));
  j->set_metadata(get_size("stats.metadata"));
  unsigned narenas = 0;
  if (Read("arenas.narenas", &narenas)) j->set_narenas(static_cast<int32_t>(narenas));
  bool bg = false;
  if (Read("background_thread", &bg)) j->set_background_thread(bg);
  ssize_t decay = 0;
  if (Read("opt.dirty_decay_ms", &decay)) j->set_dirty_decay_ms(decay);
  if (Read("opt.muzzy_decay_ms", &decay)) j->set_muzzy_decay_ms(decay);
  const std::string version = Version();
  if (!version.empty()) j->set_version(version);
  out->set_allocated_bytes(j->allocated());
  out->set_resident_bytes(j->resident());
  if (!failed.empty()) {
    out->set_note(absl::StrCat("mallctl failed for ", failed,
                               " (jemalloc built without stats?)"));
  }
}

void Jemalloc::FillOwnThreadStats(rsslab::v1::ThreadAllocStats* out) const {
  unsigned arena = 0;
  if (!Read("thread.arena", &arena)) return;
  out->set_arena(static_cast<int32_t>(arena));
  Epoch();
  size_t page = 4096;
  Read("arenas.page", &page);
  auto get = [&](const char* field, bool pages) -> int64_t {
    std::string key = absl::StrCat("stats.arenas.", arena, ".", field);
    size_t v = 0;
    if (!Read(key.c_str(), &v)) return -1;
    return static_cast<int64_t>(pages ? v * page : v);
  };
  out->set_arena_active_bytes(get("pactive", true));
  out->set_arena_dirty_bytes(get("pdirty", true));
  out->set_arena_muzzy_bytes(get("pmuzzy", true));
  out->set_arena_resident_bytes(get("resident", false));
  out->set_arena_tcache_bytes(get("tcache_bytes", false));
  uint64_t allocated = 0, deallocated = 0;
  if (Read("thread.allocated", &allocated) && Read("thread.deallocated", &deallocated)) {
    out->set_thread_net_allocated_bytes(static_cast<int64_t>(allocated - deallocated));
  }
}

std::unique_ptr<Allocator> NewJemalloc(Allocator::Identity id) { return std::make_unique<Jemalloc>(std::move(id)); }

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
