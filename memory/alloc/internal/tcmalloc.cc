// gperftools' tcmalloc: figures through MallocExtension's C API (and one
// virtual call for the release rate), releases through ReleaseFreeMemory and
// MarkThreadIdle.
#include <gperftools/malloc_extension.h>

#include <memory>
#include <string>
#include <utility>

#include "memory/alloc/alloc.h"
#include "memory/alloc/internal/backends.h"
#include "memory/alloc/internal/dl.h"

namespace rsslab {
namespace alloc {
namespace internal {

class Tcmalloc final : public Allocator {
 public:
  explicit Tcmalloc(Identity id) : Allocator(std::move(id)) {
    std::string unresolved;
    Resolve("MallocExtension_GetNumericProperty", &get_numeric_, &unresolved);
    Resolve("MallocExtension_ReleaseFreeMemory", &release_free_, &unresolved);
    Resolve("MallocExtension_MarkThreadIdle", &mark_idle_, &unresolved);
    Resolve("_ZN15MallocExtension8instanceEv", &instance_, &unresolved);
    NoteUnresolved(unresolved);
    // Only the version text needs it: its absence is no missing figure.
    std::string no_version;
    Resolve("tc_version", &version_, &no_version);
  }

  // tc_version() names the project: "gperftools 2.10".
  std::string Version() const override {
    const char* v = version_ == nullptr ? nullptr : version_(nullptr, nullptr, nullptr);
    return v == nullptr ? "" : v;
  }

  int64_t ResidentBytes() const override {
    size_t heap = 0, unmapped = 0;
    if (get_numeric_ != nullptr && get_numeric_("generic.heap_size", &heap) &&
        get_numeric_("tcmalloc.pageheap_unmapped_bytes", &unmapped)) {
      return static_cast<int64_t>(heap) - static_cast<int64_t>(unmapped);
    }
    return -1;
  }

  int64_t AllocatedBytes() const override {
    size_t v = 0;
    if (get_numeric_ != nullptr && get_numeric_("generic.current_allocated_bytes", &v)) {
      return static_cast<int64_t>(v);
    }
    return -1;
  }

  Release ReleaseGlobal() const override {
    if (release_free_ == nullptr) return NotFound("MallocExtension_ReleaseFreeMemory");
    release_free_();
    return {"MallocExtension_ReleaseFreeMemory()", 0};
  }

  Release ReleaseThisThread() const override {
    if (mark_idle_ == nullptr) return NotFound("MallocExtension_MarkThreadIdle");
    mark_idle_();
    return {"MallocExtension_MarkThreadIdle()", 0};
  }

  // The thread caches went back to the central lists: release the page heap once.
  Release ReleaseAfterThreads() const override { return ReleaseGlobal(); }

 protected:
  void FillOwnStats(rsslab::v1::AllocatorStats* out) const override {
    rsslab::v1::TcmallocStats* t = out->mutable_tcmalloc();
    const std::string version = Version();
    if (!version.empty()) t->set_version(version);
    if (get_numeric_ != nullptr) {
      auto get = [&](const char* key) -> int64_t {
        size_t v = 0;
        return get_numeric_(key, &v) ? static_cast<int64_t>(v) : 0;
      };
      t->set_current_allocated_bytes(get("generic.current_allocated_bytes"));
      t->set_heap_size(get("generic.heap_size"));
      t->set_pageheap_free_bytes(get("tcmalloc.pageheap_free_bytes"));
      t->set_pageheap_unmapped_bytes(get("tcmalloc.pageheap_unmapped_bytes"));
      t->set_current_total_thread_cache_bytes(get("tcmalloc.current_total_thread_cache_bytes"));
      out->set_allocated_bytes(t->current_allocated_bytes());
      out->set_resident_bytes(t->heap_size() - t->pageheap_unmapped_bytes());
    }
    if (instance_ != nullptr) {
      // gperftools has no C wrapper for the release rate; the virtual call
      // needs only the class layout from its header, not a link.
      auto* ext = static_cast<MallocExtension*>(instance_());
      if (ext != nullptr) t->set_release_rate(ext->GetMemoryReleaseRate());
    }
  }

 private:
  int (*get_numeric_)(const char*, size_t*) = nullptr;
  void (*release_free_)() = nullptr;
  void (*mark_idle_)() = nullptr;
  void* (*instance_)() = nullptr;  // MallocExtension::instance()
  // gperftools' tc_version(int* major, int* minor, const char** patch).
  const char* (*version_)(int*, int*, const char**) = nullptr;
};

std::unique_ptr<Allocator> NewTcmalloc(Allocator::Identity id) { return std::make_unique<Tcmalloc>(std::move(id)); }

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
