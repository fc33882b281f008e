#include "control/service/request_check.h"

#include <string>

#include "absl/strings/match.h"
#include "common/phase.h"
#include "gtest/gtest.h"

namespace rsslab {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

TEST(RequestCheckTest, DefaultsComeFromThePhase) {
  const CacheCeiling ceiling{1024 * kMiB, "MemTotal"};
  v1::SetPhaseRequest r;
  r.set_phase("fill");
  EXPECT_EQ(CheckSetPhase(r, ceiling)->cache_limit_bytes, kDefaultFillCacheBytes);
  r.set_phase("shrink");
  EXPECT_EQ(CheckSetPhase(r, ceiling)->cache_limit_bytes, kDefaultShrinkCacheBytes);
  r.set_phase("idle");
  EXPECT_EQ(CheckSetPhase(r, ceiling)->cache_limit_bytes, -1);
  EXPECT_TRUE(CheckSetPhase(r, ceiling)->gc);
  r.set_gc(false);
  EXPECT_FALSE(CheckSetPhase(r, ceiling)->gc);
  r.set_cache_limit_bytes(5 * kMiB);
  EXPECT_EQ(CheckSetPhase(r, ceiling)->cache_limit_bytes, 5 * kMiB);
}

TEST(RequestCheckTest, TheCeilingIsNamedWithItsSource) {
  v1::SetPhaseRequest r;
  r.set_phase("fill");
  r.set_cache_limit_bytes(1024 * kMiB);
  EXPECT_TRUE(CheckSetPhase(r, {1024 * kMiB, "MemTotal"}).ok());
  r.set_cache_limit_bytes(1024 * kMiB + 1);
  absl::Status s = CheckSetPhase(r, {1024 * kMiB, "MemTotal"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "cache_limit_bytes must be between 0 and 1073741824 bytes (0 to 1024 MiB); got "
            "1073741825 (the ceiling is MemTotal)");
  r.set_cache_limit_bytes(-1);
  s = CheckSetPhase(r, {1024 * kMiB, "--max_cache_limit_mb"}).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "(the ceiling is --max_cache_limit_mb)"))
      << s.message();
}

TEST(RequestCheckTest, MemTotalCeilingIsThisHostsMemory) {
  const CacheCeiling c = MemTotalCeiling();
  EXPECT_EQ(c.source, "MemTotal");  // /proc/meminfo is readable here
  EXPECT_GT(c.bytes, 0);
}

TEST(RequestCheckTest, PhaseIsEchoedEscapedAndCut) {
  v1::SetPhaseRequest r;
  r.set_phase("fil\x1b[2J\n" + std::string(3 << 20, 'p'));
  absl::Status s = CheckSetPhase(r, MemTotalCeiling()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 300u);
  EXPECT_EQ(s.message().find('\n'), absl::string_view::npos);
  EXPECT_TRUE(absl::StrContains(s.message(), "unknown phase 'fil\\x1b[2J\\n")) << s.message();
  EXPECT_TRUE(absl::StrContains(s.message(), "; allowed: fill, shrink, idle, trim"));
}

TEST(RequestCheckTest, TrimModesIncludeThePurgeAndNameTheField) {
  v1::SetPhaseRequest r;
  r.set_phase("trim");
  r.set_trim_mode(v1::TRIM_FREE_BLOCK_PURGE);
  EXPECT_TRUE(CheckSetPhase(r, MemTotalCeiling()).ok());
  r.set_trim_mode(static_cast<v1::TrimMode>(4));
  EXPECT_TRUE(absl::StartsWith(CheckSetPhase(r, MemTotalCeiling()).status().message(),
                               "trim_mode must be 0"));
  v1::TrimRequest t;
  t.set_mode(v1::TRIM_FREE_BLOCK_PURGE);
  EXPECT_TRUE(CheckTrim(t).ok());
  t.set_mode(static_cast<v1::TrimMode>(-1));
  EXPECT_EQ(CheckTrim(t).status().message(),
            "mode must be 0 (default), 1 (global only), 2 (per thread) or 3 (free-block purge); "
            "got -1");
}

}  // namespace
}  // namespace rsslab
