// The allocator version text a recorded snapshot gives the sweep table.
#include "memory/alloc/version.h"

#include "gtest/gtest.h"

namespace rsslab {
namespace alloc {
namespace {

rsslab::v1::Snapshot Snap(const std::string& family, const std::string& library) {
  rsslab::v1::Snapshot s;
  s.set_allocator(family);
  s.set_allocator_library(library);
  return s;
}

TEST(AllocatorVersionTextTest, MimallocTextThenNumberThenLibrary) {
  rsslab::v1::Snapshot s = Snap("mimalloc", "/p/.deps/mimalloc3/libmimalloc.so.3.0");
  EXPECT_EQ(AllocatorVersionText(s), "mimalloc (libmimalloc.so.3.0)");
  // Snapshots from before version_text: mi_version alone (2.0.9 = 209).
  s.mutable_allocator_stats()->mutable_mimalloc()->set_version(209);
  EXPECT_EQ(AllocatorVersionText(s), "mimalloc 2.0.9");
  s.mutable_allocator_stats()->mutable_mimalloc()->set_version(301);
  s.mutable_allocator_stats()->mutable_mimalloc()->set_version_text("3.0.1");
  EXPECT_EQ(AllocatorVersionText(s), "mimalloc 3.0.1");
  EXPECT_EQ(MimallocVersionText(3010), "mi_version 3010");  // not the 3-digit form
}

TEST(AllocatorVersionTextTest, JemallocGlibcTcmalloc) {
  rsslab::v1::Snapshot j = Snap("jemalloc", "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  j.mutable_allocator_stats()->mutable_jemalloc()->set_version(
      "5.3.0-0-g54eaed1d8b56b1aa528be3bdd1877e59c56fa90c");
  EXPECT_EQ(AllocatorVersionText(j), "jemalloc 5.3.0");
  rsslab::v1::Snapshot g = Snap("glibc", "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(AllocatorVersionText(g), "glibc");  // libc.so.6 names no version
  g.mutable_allocator_stats()->mutable_glibc()->set_version("2.36");
  EXPECT_EQ(AllocatorVersionText(g), "glibc 2.36");
  rsslab::v1::Snapshot t = Snap("tcmalloc", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4.5.10");
  EXPECT_EQ(AllocatorVersionText(t), "tcmalloc (libtcmalloc.so.4.5.10)");
  t.mutable_allocator_stats()->mutable_tcmalloc()->set_version("gperftools 2.10");
  EXPECT_EQ(AllocatorVersionText(t), "gperftools 2.10");
  EXPECT_EQ(AllocatorVersionText(rsslab::v1::Snapshot()), "");
  EXPECT_EQ(LibraryVersionText("", "/x/libmimalloc.so.2.0"), "");
}

}  // namespace
}  // namespace alloc
}  // namespace rsslab
