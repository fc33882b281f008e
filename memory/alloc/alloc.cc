// Detection: which allocator serves malloc, decided once, and the backend
// for it (internal/backends.h). The only place that looks at names.
#include "memory/alloc/alloc.h"

#include <dlfcn.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/procfs/maps.h"
#include "common/procfs/proc_file.h"
#include "memory/alloc/internal/backends.h"

namespace rsslab {
namespace alloc {
namespace {

std::string NameForLibrary(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view base =
      slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (absl::StartsWith(base, "libjemalloc")) return "jemalloc";
  if (absl::StartsWith(base, "libmimalloc")) return "mimalloc";
  if (absl::StartsWith(base, "libtcmalloc")) return "tcmalloc";
  if (absl::StartsWith(base, "libc.so") || absl::StartsWith(base, "libc-")) {
    return "glibc";
  }
  return "";
}

Allocator::Identity Detect() {
  Allocator::Identity id;
  // Outside the heap: a 128 KiB std::string here is served by mmap and,
  // freed, raises glibc's mmap and trim thresholds for the whole process.
  // This runs on the first snapshot, so it would change how the process
  // being measured allocates from then on.
  absl::StatusOr<procfs::MappedText> maps = procfs::MappedText::Read(0, "maps");
  procfs::MappedAllocator mapped;
  if (maps.ok()) {
    mapped = procfs::DetectAllocator(maps->view());
  } else {
    mapped.name = "glibc";
    id.missing = absl::StrCat("maps unreadable: ", maps.status().message());
  }
  id.name = mapped.name;
  id.library = mapped.library;

  // Which library malloc itself resolves to is the final word: a mapped
  // allocator that does not interpose malloc (linked only for its API)
  // serves nothing.
  Dl_info info;
  void* malloc_sym = dlsym(RTLD_DEFAULT, "malloc");
  if (malloc_sym != nullptr && dladdr(malloc_sym, &info) != 0 &&
      info.dli_fname != nullptr) {
    std::string by_symbol = NameForLibrary(info.dli_fname);
    if (!by_symbol.empty() && by_symbol != id.name) {
      absl::StrAppend(&id.missing, id.missing.empty() ? "" : "; ", "maps suggested ",
                      id.name, " but malloc resolves to ", info.dli_fname);
      id.name = by_symbol;
      id.library = info.dli_fname;
    }
  }
  return id;
}

std::unique_ptr<Allocator> NewBackend(Allocator::Identity id) {
  if (id.name == "jemalloc") return internal::NewJemalloc(std::move(id));
  if (id.name == "mimalloc") return internal::NewMimalloc(std::move(id));
  if (id.name == "tcmalloc") return internal::NewTcmalloc(std::move(id));
  return internal::NewGlibc(std::move(id));
}

}  // namespace

const Allocator& Allocator::Get() {
  static const Allocator* const instance = NewBackend(Detect()).release();  // never destroyed
  return *instance;
}

void Allocator::NoteUnresolved(const std::string& unresolved) {
  if (unresolved.empty()) return;
  absl::StrAppend(&id_.missing, id_.missing.empty() ? "" : "; ", "dlsym found no ", unresolved);
}

void Allocator::FillStats(rsslab::v1::AllocatorStats* out) const {
  FillOwnStats(out);
  if (!id_.missing.empty()) {
    out->set_note(out->note().empty() ? id_.missing
                                      : absl::StrCat(out->note(), "; ", id_.missing));
  }
}

void Allocator::FillThreadStats(rsslab::v1::ThreadAllocStats* out) const {
  out->set_heap_committed_bytes(-1);
  out->set_heap_used_bytes(-1);
  out->set_heap_pages(-1);
  out->set_heap_reserved_bytes(-1);
  out->set_heap_resident_bytes(-1);
  out->set_heap_small_block_resident_bytes(-1);
  out->set_heap_small_block_used_bytes(-1);
  out->set_arena(-1);
  out->set_arena_active_bytes(-1);
  out->set_arena_dirty_bytes(-1);
  out->set_arena_muzzy_bytes(-1);
  out->set_arena_resident_bytes(-1);
  out->set_arena_tcache_bytes(-1);
  out->set_thread_net_allocated_bytes(-1);
  FillOwnThreadStats(out);
}

}  // namespace alloc
}  // namespace rsslab
