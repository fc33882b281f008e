#include "ctl/glibc_heap_walk.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/procfs/procfs.h"

namespace rsslab {

namespace {

// glibc's chunk layout on 64-bit Linux (malloc/malloc.c): a size word
// after the previous chunk's size, low 3 bits flags, PREV_INUSE = 1 in the
// next chunk's size telling this one is in use; chunks 16-byte aligned, at
// least 32 bytes; malloc_trim gives back the whole pages inside a free
// chunk past its first 48 bytes (sizeof(struct malloc_chunk)).
constexpr uint64_t kMinChunk = 32;
constexpr uint64_t kChunkHeader = 48;
constexpr size_t kWindow = 64 << 10;

// Reads 8-byte words of the target through one window of its memory.
class RemoteWords {
 public:
  explicit RemoteWords(int fd) : fd_(fd), buf_(kWindow) {}
  bool Read(uint64_t addr, uint64_t end, uint64_t* out) {
    if (addr < base_ || addr + 8 > base_ + len_) {
      const uint64_t want = std::min<uint64_t>(kWindow, end - addr);
      const ssize_t n = pread(fd_, buf_.data(), want, static_cast<off_t>(addr));
      if (n < 8) return false;
      base_ = addr;
      len_ = static_cast<uint64_t>(n);
    }
    memcpy(out, buf_.data() + (addr - base_), 8);
    return true;
  }

 private:
  int fd_;
  std::vector<char> buf_;
  uint64_t base_ = 0, len_ = 0;
};

// Resident pages in [from, to) (page-aligned), from /proc/PID/pagemap.
int64_t ResidentPages(int pagemap_fd, uint64_t from, uint64_t to, uint64_t page) {
  int64_t resident = 0;
  uint64_t entries[512];
  for (uint64_t p = from; p < to;) {
    const uint64_t n = std::min<uint64_t>(512, (to - p) / page);
    const ssize_t got = pread(pagemap_fd, entries, n * 8, static_cast<off_t>(p / page * 8));
    if (got <= 0) break;
    for (ssize_t i = 0; i < got / 8; ++i) {
      if (entries[i] >> 63) ++resident;  // bit 63: present in RAM
    }
    p += static_cast<uint64_t>(got / 8) * page;
  }
  return resident;
}

bool HeapRange(absl::string_view maps, uint64_t* start, uint64_t* end) {
  for (absl::string_view line : absl::StrSplit(maps, '\n')) {
    if (!absl::EndsWith(absl::StripTrailingAsciiWhitespace(line), " [heap]")) continue;
    const size_t dash = line.find('-'), space = line.find(' ');
    if (dash == absl::string_view::npos || space == absl::string_view::npos || space < dash) {
      return false;
    }
    return absl::SimpleHexAtoi(line.substr(0, dash), start) &&
           absl::SimpleHexAtoi(line.substr(dash + 1, space - dash - 1), end) && *end > *start;
  }
  return false;
}

// glibc's thread-arena heaps: anonymous rw-p mappings at a multiple of
// HEAP_MAX_SIZE (64 MiB), each starting with a heap_info (ar_ptr, prev,
// size, mprotect_size). The kernel merges a heap's rw-p part with a thread
// stack mapped right below it, so a mapping may also hold one at its one
// aligned address (the walk checks the heap_info there). Returns (start,
// rw end) pairs, at most 4096.
std::vector<std::pair<uint64_t, uint64_t>> ArenaHeapCandidates(absl::string_view maps) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (absl::string_view line : absl::StrSplit(maps, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() != 5 || f[1] != "rw-p") continue;  // no path: anonymous
    const size_t dash = f[0].find('-');
    uint64_t a = 0, b = 0;
    if (dash == absl::string_view::npos || !absl::SimpleHexAtoi(f[0].substr(0, dash), &a) ||
        !absl::SimpleHexAtoi(f[0].substr(dash + 1), &b) || b <= a) {
      continue;
    }
    const uint64_t heap = procfs::GlibcHeapBoundaryAtOrAbove(a);
    if (heap >= b || b - heap > procfs::kGlibcHeapMaxSize) continue;
    out.push_back({heap, b});
    if (out.size() >= 4096) break;
  }
  return out;
}

struct WalkTotals {
  int64_t chunks = 0, free_chunks = 0, free_bytes = 0, trimmable = 0, top = 0;
};

// Walks chunks from `p` to `end`; "" when the chain reaches the end (or an
// arena heap's closing fencepost), else what stopped it.
std::string WalkChunks(RemoteWords* words, int pagemap, uint64_t page, uint64_t p, uint64_t end,
                       bool arena, absl::Time deadline, WalkTotals* t) {
  const uint64_t start = p;
  while (p < end) {
    uint64_t raw = 0;
    if (!words->Read(p + 8, end, &raw)) return absl::StrCat("unreadable at +", p - start);
    const uint64_t size = raw & ~uint64_t{7};
    // An old arena heap ends in fenceposts: a 16-byte chunk, then size 0.
    if (arena && (size == 16 || (size == 0 && p > start))) return "";
    if (size < kMinChunk || size % 16 != 0 || size > end - p) {
      return absl::StrCat("chunk at +", p - start, " has size ", size, ": not glibc's layout");
    }
    ++t->chunks;
    const bool top = p + size == end;
    uint64_t next_raw = 0;
    if (!top && !words->Read(p + size + 8, end, &next_raw)) {
      return absl::StrCat("unreadable at +", p + size - start);
    }
    if (top || (next_raw & 1) == 0) {
      ++t->free_chunks;
      t->free_bytes += static_cast<int64_t>(size);
      if (top) t->top += static_cast<int64_t>(size);
      const uint64_t from = (p + kChunkHeader + page - 1) / page * page;
      const uint64_t to = (p + size) / page * page;
      if (to > from) t->trimmable += ResidentPages(pagemap, from, to, page) * static_cast<int64_t>(page);
    }
    p += size;
    if ((t->chunks & 4095) == 0 && absl::Now() > deadline) {
      return absl::StrCat("stopped at the time budget, at +", p - start, " of ", end - start,
                          " bytes");
    }
  }
  return "";
}

// One thread-arena heap: checks its heap_info, finds its first chunk (past
// the malloc_state in an arena's first heap) and walks it. False when it is
// not a glibc heap or the walk did not chain to its end.
bool WalkArenaHeap(RemoteWords* words, int pagemap, uint64_t page, uint64_t h, uint64_t rw_end,
                   absl::Time deadline, WalkTotals* t) {
  uint64_t ar_ptr = 0, size = 0, mprotect_size = 0;
  if (!words->Read(h, rw_end, &ar_ptr) || !words->Read(h + 16, rw_end, &size) ||
      !words->Read(h + 24, rw_end, &mprotect_size)) {
    return false;
  }
  if (mprotect_size != rw_end - h || size == 0 || size > mprotect_size || size % page != 0) {
    return false;
  }
  const uint64_t end = h + size;
  // heap_info is 32 bytes before glibc 2.35 and 48 since (its pagesize
  // field); an arena's first heap holds the arena's malloc_state right after
  // it (ar_ptr), 2200 bytes on glibc 2.36 x86-64, the first chunk 16-byte
  // aligned after that. Other sizes are tried after the expected one, and
  // only a chain that reaches the heap's end is taken.
  std::vector<uint64_t> firsts;
  if (ar_ptr == h + 32 || ar_ptr == h + 48) {
    const uint64_t expected = (ar_ptr + 2200 + 15) / 16 * 16;
    firsts.push_back(expected);
    for (uint64_t c = (ar_ptr + 1024 + 15) / 16 * 16; c < ar_ptr + 4096; c += 16) {
      if (c != expected) firsts.push_back(c);
    }
  } else {
    firsts = {h + 48, h + 32};
  }
  for (uint64_t first : firsts) {
    if (absl::Now() > deadline) return false;
    WalkTotals one;
    if (WalkChunks(words, pagemap, page, first, end, true, deadline, &one).empty() && one.chunks > 0) {
      t->chunks += one.chunks;
      t->free_chunks += one.free_chunks;
      t->free_bytes += one.free_bytes;
      t->trimmable += one.trimmable;
      return true;
    }
  }
  return false;
}

}  // namespace

void WalkGlibcHeaps(int pid, absl::string_view maps, rsslab::v1::HeapWalk* out,
                    absl::Duration budget) {
  uint64_t start = 0, end = 0;
  const bool brk = HeapRange(maps, &start, &end);
  const auto arenas = ArenaHeapCandidates(maps);
  if (!brk && arenas.empty()) {
    out->set_note("no [heap] mapping and no arena heap");
    return;
  }
  if (brk) out->set_heap_bytes(static_cast<int64_t>(end - start));
  const std::string mem_path = absl::StrCat("/proc/", pid, "/mem");
  const std::string pagemap_path = absl::StrCat("/proc/", pid, "/pagemap");
  const int mem = open(mem_path.c_str(), O_RDONLY | O_CLOEXEC);
  const int pagemap = mem < 0 ? -1 : open(pagemap_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (mem < 0 || pagemap < 0) {
    out->set_note(absl::StrCat("not walked: ", mem < 0 ? mem_path : pagemap_path, ": ",
                               strerror(errno), " (needs ptrace access: root, or the same user "
                               "where kernel.yama.ptrace_scope allows it)"));
    if (mem >= 0) close(mem);
    return;
  }
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const absl::Time deadline = absl::Now() + budget;
  RemoteWords words(mem);
  std::string note;
  if (brk) {
    WalkTotals t;
    note = WalkChunks(&words, pagemap, page, start, end, false, deadline, &t);
    out->set_chunks(t.chunks);
    out->set_free_chunks(t.free_chunks);
    out->set_free_bytes(t.free_bytes);
    out->set_trimmable_bytes(t.trimmable);
    out->set_top_bytes(t.top);
  }
  WalkTotals a;
  int walked = 0;
  for (const auto& [h, rw_end] : arenas) {
    if (absl::Now() > deadline) break;
    if (WalkArenaHeap(&words, pagemap, page, h, rw_end, deadline, &a)) ++walked;
  }
  close(mem);
  close(pagemap);
  out->set_arena_heaps_walked(walked);
  out->set_arena_chunks(a.chunks);
  out->set_arena_free_bytes(a.free_bytes);
  out->set_arena_trimmable_bytes(a.trimmable);
  out->set_walked(brk && note.empty());
  out->set_note(!brk ? "no [heap] mapping" : note.empty() ? "walked to the top chunk" : note);
}

}  // namespace rsslab
