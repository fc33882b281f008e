#include "common/procfs/smaps.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/procfs/internal/parse.h"
#include "common/procfs/proc_file.h"

namespace rsslab {
namespace procfs {

namespace {

using internal::NextLine;
using internal::ParseHeader;
using internal::ParseKb;
using internal::Vma;

// std::allocator over mmap/munmap, for the smaps classifier's per-mapping
// array (~100 bytes a mapping, ~600 mappings at 64 threads): like the text,
// kept out of the heap being measured.
template <typename T>
struct MmapAllocator {
  using value_type = T;
  MmapAllocator() = default;
  template <typename U>
  MmapAllocator(const MmapAllocator<U>&) {}  // NOLINT(runtime/explicit)
  T* allocate(size_t n) {
    void* p = mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) { munmap(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const MmapAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const MmapAllocator<U>&) const { return false; }
};

enum Kind { kUnclassified, kHeap, kArena, kArenaTail, kStack, kAnon, kFile, kSpecial };

const char* KindName(int kind) {
  switch (kind) {
    case kHeap: return "heap";
    case kArena:
    case kArenaTail: return "arena";
    case kStack: return "stack";
    case kFile: return "file";
    case kSpecial: return "special";
    default: return "anon";
  }
}

bool IsShared(const Vma& v) { return v.perms[3] == 's'; }
bool IsAnonymous(const Vma& v) { return v.path.empty(); }

// Classes that follow from a mapping alone (not from its neighbours).
int KindByName(const Vma& v) {
  const absl::string_view p = v.path;
  if (p.empty()) return kUnclassified;
  if (p == "[heap]") return kHeap;
  if (p == "[stack]") return kStack;
  if (absl::StartsWith(p, "[anon_shmem:")) return kSpecial;
  if (absl::StartsWith(p, "[anon:")) return kAnon;
  if (p[0] == '[') return kSpecial;
  if (IsShared(v) &&
      (absl::StartsWith(p, "/dev/zero") || absl::StartsWith(p, "/SYSV") ||
       absl::StartsWith(p, "/memfd:") || absl::StartsWith(p, "/dev/shm/"))) {
    return kSpecial;
  }
  return kFile;
}

using VmaVector = std::vector<Vma, MmapAllocator<Vma>>;

// Classifies anonymous mappings, which needs their neighbours (see header).
void ClassifyAnonymous(VmaVector* vmas) {
  VmaVector& v = *vmas;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].kind != kUnclassified) continue;
    // A glibc heap is a 64 MiB aligned reservation whose used part is rw-p
    // and the rest ---p. The kernel merges adjacent anonymous rw-p
    // mappings, so its rw-p part may begin earlier (a thread stack mapped
    // right below it): it is found by the one aligned address inside the
    // rw-p mapping whose 64 MiB the ---p run after it completes (or the
    // rw-p mapping itself, for a full heap). A mapping spanning more
    // boundaries is not taken for a heap: mimalloc's and jemalloc's large
    // reservations are rw-p too.
    if (v[i].perms == "rw-p") {
      const uint64_t first = GlibcHeapBoundaryAtOrAbove(v[i].start);
      const uint64_t limit = GlibcHeapBoundaryAtOrAbove(v[i].end);
      uint64_t extent = v[i].end;
      size_t j = i + 1;
      while (j < v.size() && v[j].kind == kUnclassified &&
             v[j].perms == "---p" && v[j].start == extent &&
             v[j].end <= limit) {
        extent = v[j].end;
        ++j;
      }
      if (extent == limit && limit - first == kGlibcHeapMaxSize) {
        v[i].kind = kArena;
        for (size_t k = i + 1; k < j; ++k) v[k].kind = kArenaTail;
        i = j - 1;
        continue;
      }
    }
    // The guard was classified (as anon) on the previous iteration; an arena's
    // ---p tail is never a guard.
    if (v[i].perms == "rw-p" && i > 0 && v[i - 1].kind == kAnon &&
        IsAnonymous(v[i - 1]) && v[i - 1].perms == "---p" && v[i - 1].end == v[i].start &&
        v[i - 1].end - v[i - 1].start <= kMaxGuardSize) {
      v[i].kind = kStack;
      continue;
    }
    v[i].kind = kAnon;
  }
}

}  // namespace

namespace {

// Every mapping of an smaps text with its Rss, Anonymous and Swap figures.
void ParseVmas(absl::string_view smaps, VmaVector* out) {
  // One allocation for all entries: count headers first (cheap, no parse).
  size_t headers = 0;
  for (size_t pos = 0; pos < smaps.size();) {
    char c = smaps[pos];
    if (absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f')) ++headers;
    size_t nl = smaps.find('\n', pos);
    if (nl == absl::string_view::npos) break;
    pos = nl + 1;
  }
  VmaVector& vmas = *out;
  vmas.reserve(headers);

  absl::string_view text = smaps;
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    Vma header;
    if (ParseHeader(line, &header)) {
      header.kind = KindByName(header);
      vmas.push_back(header);
      continue;
    }
    if (vmas.empty()) continue;
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view key = line.substr(0, colon);
    int64_t* field = nullptr;
    if (key == "Rss") {
      field = &vmas.back().rss;
    } else if (key == "Anonymous") {
      field = &vmas.back().anon;
    } else if (key == "Swap") {
      field = &vmas.back().swap;
    }
    if (field != nullptr) ParseKb(line.substr(colon + 1), field);
  }
}

// The n mappings with the most RSS, ties by address (stable across identical inputs).
void AddLargest(const VmaVector& vmas, int detail_top_n, rsslab::v1::MemoryMap* out) {
  if (detail_top_n <= 0 || vmas.empty()) return;
  size_t n = std::min(static_cast<size_t>(detail_top_n), vmas.size());
  std::vector<const Vma*, MmapAllocator<const Vma*>> order;
  order.reserve(vmas.size());
  for (const Vma& v : vmas) order.push_back(&v);
  std::partial_sort(order.begin(), order.begin() + n, order.end(),
                    [](const Vma* a, const Vma* b) {
                      if (a->rss != b->rss) return a->rss > b->rss;
                      return a->start < b->start;
                    });
  for (size_t i = 0; i < n; ++i) {
    const Vma& v = *order[i];
    rsslab::v1::Mapping* m = out->add_largest();
    m->set_range(std::string(v.range));
    m->set_perms(std::string(v.perms));
    m->set_name(std::string(v.path));
    m->set_kind(KindName(v.kind));
    m->set_size_bytes(static_cast<int64_t>(v.end - v.start));
    m->set_rss_bytes(v.rss);
  }
}

}  // namespace

void ClassifySmaps(absl::string_view smaps, int detail_top_n,
                   rsslab::v1::MemoryMap* out) {
  VmaVector vmas;
  ParseVmas(smaps, &vmas);
  ClassifyAnonymous(&vmas);

  int32_t arena_count = 0, stack_count = 0, anon_mappings = 0;
  int64_t heap = 0, arena = 0, arena_size = 0, stack = 0, anon = 0, file = 0,
          special = 0, rss = 0, anon_rss = 0, swap = 0;
  for (const Vma& v : vmas) {
    rss += v.rss;
    anon_rss += v.anon;
    swap += v.swap;
    if (v.kind != kFile && v.kind != kSpecial) ++anon_mappings;
    switch (v.kind) {
      case kHeap: heap += v.rss; break;
      case kArena:
        ++arena_count;
        arena_size += static_cast<int64_t>(v.end - v.start);
        arena += v.rss;
        break;
      case kArenaTail: arena += v.rss; break;
      case kStack:
        ++stack_count;
        stack += v.rss;
        break;
      case kFile: file += v.rss; break;
      case kSpecial: special += v.rss; break;
      default: anon += v.rss; break;
    }
  }
  out->set_heap_rss_bytes(heap);
  out->set_arena_count(arena_count);
  out->set_arena_rss_bytes(arena);
  out->set_arena_size_bytes(arena_size);
  out->set_stack_count(stack_count);
  out->set_stack_rss_bytes(stack);
  out->set_other_anon_rss_bytes(anon);
  out->set_file_rss_bytes(file);
  out->set_special_rss_bytes(special);
  out->set_anon_mappings(anon_mappings);
  out->set_mappings(static_cast<int32_t>(vmas.size()));
  out->set_rss_bytes(rss);
  out->set_anon_rss_bytes(anon_rss);
  out->set_swap_bytes(swap);
  out->clear_largest();

  AddLargest(vmas, detail_top_n, out);
}

absl::Status ReadSmaps(int pid, int detail_top_n, rsslab::v1::MemoryMap* out) {
  absl::StatusOr<MappedText> text = MappedText::Read(pid, "smaps");
  if (!text.ok()) return text.status();
  ClassifySmaps(text->view(), detail_top_n, out);
  return absl::OkStatus();
}

}  // namespace procfs
}  // namespace rsslab
