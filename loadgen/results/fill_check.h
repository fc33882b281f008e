// Did a run's fill phase reproduce seed 000's conditions? Seed 000's fill
// stores ~3.5x its 100 MiB cache limit (96,000 requests x 0.3 stored x
// ~12.6 KiB), so the cache fills and churns; a run scaled down too far never
// reaches the limit, and its "under load" and later figures are a different,
// smaller experiment. The check reads the cache counters of the last
// snapshot taken in the fill phase.
//
//   rsslab::v1::FillCheck c = rsslab::CheckFill(fill_snapshot.cache());
//   if (!c.filled()) ...   // c.verdict(): "cache never filled: not seed 000's conditions (...)"
//
//   rsslab::FillWatch watch;           // fed every record of one run or cell,
//   if (auto c = watch.Add(event))     // says once when the fill phase ended
//     fprintf(stderr, "%s\n", c->verdict().c_str());
#ifndef RSSLAB_LOADGEN_RESULTS_FILL_CHECK_H_
#define RSSLAB_LOADGEN_RESULTS_FILL_CHECK_H_

#include <optional>
#include <string>

#include "proto/results.pb.h"
#include "proto/snapshot.pb.h"

namespace rsslab {

// The flag every summary and the loadgen's stderr use, verbatim.
inline constexpr char kCacheNeverFilled[] = "cache never filled: not seed 000's conditions";

// filled = the cache evicted and the bytes put reached the limit; the
// verdict names the figures either way. A snapshot without a cache limit
// (cache_limit_bytes <= 0) is "not filled" too: nothing bounded the fill.
rsslab::v1::FillCheck CheckFill(const rsslab::v1::CacheStats& cache);

// The last snapshot taken while the loadgen had set "fill", from any record
// that carries one (snapshot, phase, trim); nullptr if the record has none.
const rsslab::v1::Snapshot* FillSnapshotOf(const rsslab::v1::Event& event);

// A table cell: "yes(3.50x)" (filled; churn = stored / limit), "NEVER(0.72x)",
// "-" for a run without a fill phase. No spaces: tables split on them.
std::string FillCell(const std::optional<rsslab::v1::FillCheck>& fill);
// summary.md's paragraph: the verdict, flagged in bold when never filled;
// empty for a run without a fill phase.
std::string FillMarkdown(const std::optional<rsslab::v1::FillCheck>& fill);

// The fill_check record to append after `like` (the record that ended the
// fill): same cell tags, phase and cycle.
rsslab::v1::Event FillCheckRecord(const rsslab::v1::FillCheck& fill,
                                  const rsslab::v1::Event& like);

// What the loadgen prints, once, when the check is off.
inline constexpr char kFillCheckOff[] =
    "fill check off: no cache reports a limit (the service's snapshots carry no "
    "cache_limit_bytes), so there is no seed-000 fill to check";

// Follows one run's records as they are written. Add() returns the check
// once, on the first record made after the fill phase (the loadgen set
// another phase); later fills (soak cycles) add nothing: the first fill is
// the one that starts from an empty cache. Finish() returns it if the run
// ended while still in fill and it was not returned yet. When no fill
// snapshot carried a cache limit (a service with no cache, or one read from
// /proc) the check is off: nothing is returned and off() turns true.
class FillWatch {
 public:
  std::optional<rsslab::v1::FillCheck> Add(const rsslab::v1::Event& event);
  std::optional<rsslab::v1::FillCheck> Finish();
  bool off() const { return off_; }

 private:
  std::optional<rsslab::v1::FillCheck> Check();
  bool saw_fill_ = false;
  bool saw_limit_ = false;
  bool done_ = false;
  bool off_ = false;
  rsslab::v1::CacheStats last_;
};

}  // namespace rsslab

#endif  // RSSLAB_LOADGEN_RESULTS_FILL_CHECK_H_
