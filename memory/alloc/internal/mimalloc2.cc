// mimalloc 2.x (2.0.x and 2.1.x): per-thread segments, so a trim needs a
// second visit to each worker.
//
// mimalloc 2.0.x schedules the decommit of the spans that mi_collect freed
// (decommit_delay, 25 ms by default) and carries it out only when the owning
// thread next allocates a page in that segment (segment.c:
// mi_segments_page_alloc -> mi_segment_delayed_decommit); an idle worker
// never does. So after the per-thread pass the trimmer waits FollowUpDelay()
// and runs FollowUpThisThread() on every worker: one large (page-sized)
// mi_malloc + mi_free, which makes the thread allocate a page and so
// decommit its segment's expired spans. With the delay held at 0 for the
// trim (OverrideReleaseDelay) the large free decommits the span it coalesces
// with at once, spans scheduled before the trim included (docs/TRIM.md).
// The option is the loaded version's: decommit_delay on 2.0.x (and 2.1.0,
// 2.1.1, which kept 2.0.9's enum), purge_delay on 2.1.2+.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/time/time.h"
#include "memory/alloc/internal/mimalloc.h"

namespace rsslab {
namespace alloc {
namespace internal {

class Mimalloc2 final : public Mimalloc {
 public:
  using Mimalloc::Mimalloc;

  // mimalloc's committed counter (its current_rss estimate on Linux).
  int64_t ResidentBytes() const override {
    if (api().process_info == nullptr) return -1;
    size_t e, u, s, rss, peak_rss, commit = 0, peak_commit, faults;
    api().process_info(&e, &u, &s, &rss, &peak_rss, &commit, &peak_commit, &faults);
    const int64_t c = static_cast<int64_t>(commit);
    return c < 0 ? -1 : c;  // a wrapped counter (FillProcessInfo) is no figure
  }

  bool HasFollowUp() const override {
    return api().malloc != nullptr && api().free != nullptr;
  }

  absl::Duration FollowUpDelay() const override {
    if (!HasFollowUp() || api().option_get == nullptr) return absl::ZeroDuration();
    const int delay_option = DelayOption();
    if (delay_option < 0) return absl::ZeroDuration();
    long delay = api().option_get(delay_option);  // NOLINT(runtime/int)
    if (delay <= 0) return absl::ZeroDuration();  // 0: decommitted at free; < 0: never
    // Past the delay and the extension a later free may add, with a margin
    // for the clock's granularity.
    const int extend_option = ExtendOption();
    long extend = extend_option < 0 ? 0 : api().option_get(extend_option);  // NOLINT(runtime/int)
    return absl::Milliseconds(delay + std::max(0L, extend) + 5);
  }

  Release FollowUpThisThread() const override {
    if (!HasFollowUp()) return {"none", 0};
    // Larger than MI_MEDIUM_OBJ_SIZE_MAX (128 KiB): a large block always gets
    // a fresh page of its own, so the allocation goes through the segment
    // page allocator that runs the expired decommits. Through the dlsym'd
    // pointers so the compiler cannot drop the pair.
    constexpr size_t kLargeBlock = 256 << 10;
    void* p = api().malloc(kLargeBlock);
    api().free(p);
    return {"mi_malloc(256 KiB)+mi_free", p == nullptr ? -1 : 0};
  }
};

std::unique_ptr<Allocator> NewMimalloc2(MimallocFound f) { return std::make_unique<Mimalloc2>(std::move(f)); }

}  // namespace internal
}  // namespace alloc
}  // namespace rsslab
