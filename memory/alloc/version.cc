#include "memory/alloc/version.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace rsslab {
namespace alloc {

std::string MimallocVersionText(int version) {
  // major*100 + minor*10 + patch up to 3.0.9; later releases use other
  // encodings (3010 = 3.0.10, 20300 = 2.3.0), so only the 3-digit form is read.
  if (version >= 100 && version <= 999) {
    return absl::StrCat(version / 100, ".", (version / 10) % 10, ".", version % 10);
  }
  return absl::StrCat("mi_version ", version);
}

std::string LibraryVersionText(absl::string_view family, absl::string_view library) {
  if (family.empty()) return "";
  const size_t slash = library.rfind('/');
  absl::string_view base = slash == absl::string_view::npos ? library : library.substr(slash + 1);
  // glibc's "libc.so.6" is the same file name in every release: no version.
  if (base.empty() || absl::StartsWith(base, "libc.") || absl::StartsWith(base, "libc-")) {
    return std::string(family);
  }
  return absl::StrCat(family, " (", base, ")");
}

std::string AllocatorVersionText(const rsslab::v1::Snapshot& snap) {
  const std::string& family = snap.allocator();
  if (family.empty()) return "";
  const rsslab::v1::AllocatorStats& a = snap.allocator_stats();
  std::string version;
  // Which allocator's stats the snapshot holds says whose version to read.
  if (a.has_mimalloc()) {
    version = !a.mimalloc().version_text().empty() ? a.mimalloc().version_text()
              : a.mimalloc().version() > 0       ? MimallocVersionText(a.mimalloc().version())
                                                 : "";
  } else if (a.has_jemalloc()) {
    // "5.3.0-0-g54eaed1d...": the release, without git's describe suffix.
    const std::string& v = a.jemalloc().version();
    version = v.substr(0, v.find('-'));
  } else if (a.has_glibc()) {
    version = a.glibc().version();
  } else if (a.has_tcmalloc() && !a.tcmalloc().version().empty()) {
    // tc_version() names the project: "gperftools 2.10".
    return a.tcmalloc().version();
  }
  if (!version.empty()) return absl::StrCat(family, " ", version);
  return LibraryVersionText(family, snap.allocator_library());
}

}  // namespace alloc
}  // namespace rsslab
