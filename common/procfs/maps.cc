#include "common/procfs/maps.h"

#include <utility>

#include "absl/strings/match.h"
#include "common/procfs/internal/parse.h"

namespace rsslab {
namespace procfs {

using internal::NextLine;
using internal::ParseHeader;
using internal::Vma;

namespace {

absl::string_view Basename(absl::string_view path) {
  size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// Calls fn(path) for the path of every maps/smaps header line.
template <typename Fn>
void ForEachPath(absl::string_view text, Fn fn) {
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    Vma v;
    if (ParseHeader(line, &v) && !v.path.empty()) {
      if (fn(v.path)) return;
    }
  }
}

}  // namespace

MappedAllocator DetectAllocator(absl::string_view maps_text) {
  static constexpr std::pair<const char*, const char*> kLibs[] = {
      {"jemalloc", "libjemalloc"},
      {"mimalloc", "libmimalloc"},
      {"tcmalloc", "libtcmalloc"},
  };
  std::string found[3];
  std::string libc;
  ForEachPath(maps_text, [&](absl::string_view path) {
    absl::string_view base = Basename(path);
    for (int i = 0; i < 3; ++i) {
      if (found[i].empty() && absl::StartsWith(base, kLibs[i].second)) {
        found[i] = std::string(path);
      }
    }
    if (libc.empty() &&
        (absl::StartsWith(base, "libc.so") || absl::StartsWith(base, "libc-"))) {
      libc = std::string(path);
    }
    return false;
  });
  for (int i = 0; i < 3; ++i) {
    if (!found[i].empty()) return {kLibs[i].first, found[i]};
  }
  return {"glibc", libc, /*glibc=*/true};
}

bool IsMapped(absl::string_view maps_text, absl::string_view substring) {
  bool hit = false;
  ForEachPath(maps_text, [&](absl::string_view path) {
    hit = absl::StrContains(path, substring);
    return hit;
  });
  return hit;
}

std::string FirstMappedPath(absl::string_view maps_text,
                            absl::FunctionRef<bool(absl::string_view path)> match) {
  std::string found;
  ForEachPath(maps_text, [&](absl::string_view path) {
    if (!match(path)) return false;
    found = std::string(path);
    return true;
  });
  return found;
}

std::string MappedPath(absl::string_view maps_text, absl::string_view prefix,
                       absl::string_view contains) {
  return FirstMappedPath(maps_text, [&](absl::string_view path) {
    absl::string_view base = Basename(path);
    return absl::StartsWith(base, prefix) && (contains.empty() || absl::StrContains(base, contains));
  });
}

}  // namespace procfs
}  // namespace rsslab
