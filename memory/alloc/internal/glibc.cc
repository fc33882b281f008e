// glibc's malloc: mallinfo2 and malloc_info for figures, malloc_trim(0) to
// release (it walks every arena, so there is no per-thread step).
#include <gnu/libc-version.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "memory/alloc/alloc.h"
#include "memory/alloc/internal/backends.h"

namespace rsslab {
namespace alloc {
namespace internal {

class Glibc final : public Allocator {
 public:
  explicit Glibc(Identity id) : Allocator(std::move(id)) {}

  std::string Version() const override { return gnu_get_libc_version(); }

  int64_t InUseBytesByWalk() const override {
    struct mallinfo2 mi = mallinfo2();
    return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
  }

  bool ArenaCapApplies() const override { return true; }
  std::string ArenaCountHint() const override { return ""; }

  Release ReleaseGlobal() const override { return {"malloc_trim(0)", malloc_trim(0)}; }

 protected:
  void FillOwnStats(rsslab::v1::AllocatorStats* out) const override {
    rsslab::v1::GlibcStats* g = out->mutable_glibc();
    struct mallinfo2 mi = mallinfo2();
    g->set_version(gnu_get_libc_version());
    g->set_arena(static_cast<int64_t>(mi.arena));
    g->set_ordblks(static_cast<int64_t>(mi.ordblks));
    g->set_smblks(static_cast<int64_t>(mi.smblks));
    g->set_hblks(static_cast<int64_t>(mi.hblks));
    g->set_hblkhd(static_cast<int64_t>(mi.hblkhd));
    g->set_fsmblks(static_cast<int64_t>(mi.fsmblks));
    g->set_uordblks(static_cast<int64_t>(mi.uordblks));
    g->set_fordblks(static_cast<int64_t>(mi.fordblks));
    g->set_keepcost(static_cast<int64_t>(mi.keepcost));
    out->set_allocated_bytes(static_cast<int64_t>(mi.uordblks + mi.hblkhd));
    out->set_resident_bytes(0);
    std::string note =
        "glibc has no resident figure (malloc_trim releases pages inside arenas "
        "without changing system bytes): use RSS";
    absl::Status s = ReadMallocInfo(g);
    if (!s.ok()) absl::StrAppend(&note, "; malloc_info: ", s.message());
    out->set_note(note);
  }
};

std::unique_ptr<Allocator> NewGlibc(Allocator::Identity id) { return std::make_unique<Glibc>(std::move(id)); }

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
