#include "loadgen/results/fill_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rsslab {
namespace {

double Mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

rsslab::v1::FillCheck CheckFill(const rsslab::v1::CacheStats& cache) {
  rsslab::v1::FillCheck c;
  const int64_t limit = cache.cache_limit_bytes();
  // Bytes the fill put: what is held plus what was evicted to make room
  // (a put replacing a key already held is not counted: a lower bound).
  const int64_t stored = cache.cache_bytes() + cache.evicted_bytes();
  c.set_limit_bytes(limit);
  c.set_stored_bytes(stored);
  c.set_evictions(cache.evictions());
  c.set_cache_bytes(cache.cache_bytes());
  c.set_churn(limit > 0 ? static_cast<double>(stored) / static_cast<double>(limit) : 0);
  c.set_filled(limit > 0 && cache.evictions() > 0 && stored >= limit);
  c.set_churned_twice(limit > 0 && stored >= 2 * limit);
  const std::string figures =
      absl::StrFormat("fill stored %.1f MiB = %.2fx the %.1f MiB limit, %d evictions",
                      Mib(stored), c.churn(), Mib(limit), cache.evictions());
  c.set_verdict(c.filled() ? absl::StrFormat("cache filled (%s)", figures)
                           : absl::StrFormat("%s (%s)", kCacheNeverFilled, figures));
  return c;
}

std::string FillCell(const std::optional<rsslab::v1::FillCheck>& fill) {
  if (!fill) return "-";  // no fill phase, or the check was off
  return absl::StrFormat("%s(%.2fx)", fill->filled() ? "yes" : "NEVER", fill->churn());
}

std::string FillMarkdown(const std::optional<rsslab::v1::FillCheck>& fill) {
  if (!fill) return "";
  if (fill->filled()) return absl::StrCat("Fill check: ", fill->verdict(), ".\n\n");
  return absl::StrCat(
      "**Fill check: ", fill->verdict(),
      ".** The cache never reached its limit, so the figures below are not seed "
      "000's: rerun at a larger `--scale` (docs/FILL.md).\n\n");
}

rsslab::v1::Event FillCheckRecord(const rsslab::v1::FillCheck& fill,
                                  const rsslab::v1::Event& like) {
  rsslab::v1::Event e;
  e.set_cell(like.cell());
  e.set_profile(like.profile());
  e.set_threads(like.threads());
  e.set_repeat(like.repeat());
  e.set_cycle(like.cycle());
  e.set_loadgen_phase(like.loadgen_phase());
  *e.mutable_fill_check() = fill;
  return e;
}

const rsslab::v1::Snapshot* FillSnapshotOf(const rsslab::v1::Event& event) {
  if (event.loadgen_phase() != "fill") return nullptr;
  switch (event.record_case()) {
    case rsslab::v1::Event::kSnapshot:
      return &event.snapshot();
    case rsslab::v1::Event::kPhase:
      return event.phase().has_snapshot() ? &event.phase().snapshot() : nullptr;
    case rsslab::v1::Event::kTrim:
      return event.trim().has_after() ? &event.trim().after() : nullptr;
    default:
      return nullptr;
  }
}

std::optional<rsslab::v1::FillCheck> FillWatch::Add(const rsslab::v1::Event& event) {
  if (done_) return std::nullopt;
  if (const rsslab::v1::Snapshot* s = FillSnapshotOf(event)) {
    saw_fill_ = true;
    last_ = s->cache();
    saw_limit_ = saw_limit_ || last_.cache_limit_bytes() > 0;
    return std::nullopt;
  }
  // The first record of another phase: the fill is over. Setting the next
  // phase snapshots the server just before the switch: the fill's last state.
  if (saw_fill_ && !event.loadgen_phase().empty() && event.loadgen_phase() != "fill") {
    done_ = true;
    if (event.has_phase() && event.phase().has_before()) last_ = event.phase().before().cache();
    return Check();
  }
  return std::nullopt;
}

std::optional<rsslab::v1::FillCheck> FillWatch::Finish() {
  if (done_ || !saw_fill_) return std::nullopt;
  done_ = true;
  return Check();
}

std::optional<rsslab::v1::FillCheck> FillWatch::Check() {
  if (!saw_limit_ && last_.cache_limit_bytes() <= 0) {
    off_ = true;
    return std::nullopt;
  }
  return CheckFill(last_);
}

}  // namespace rsslab
