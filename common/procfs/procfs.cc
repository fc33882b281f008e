#include "common/procfs/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace rsslab {
namespace procfs {
namespace {

std::string ProcPath(int pid, absl::string_view name) {
  if (pid == 0) return absl::StrCat("/proc/self/", name);
  return absl::StrCat("/proc/", pid, "/", name);
}

// The same path in a caller's buffer: building it must not malloc either.
void ProcPathInto(int pid, absl::string_view name, char* buf, size_t size) {
  if (pid == 0) {
    snprintf(buf, size, "/proc/self/%.*s", static_cast<int>(name.size()), name.data());
  } else {
    snprintf(buf, size, "/proc/%d/%.*s", pid, static_cast<int>(name.size()), name.data());
  }
}

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

// First guess of a file's size: procfs reports st_size 0, so guessing well
// means one allocation instead of a chain of doublings.
size_t InitialCapacity(absl::string_view name) {
  if (absl::EndsWith(name, "smaps")) return 1 << 20;
  if (absl::EndsWith(name, "maps")) return 128 << 10;
  return 8 << 10;
}

// Splits off the next line (without '\n') from *text.
absl::string_view NextLine(absl::string_view* text) {
  size_t nl = text->find('\n');
  absl::string_view line = text->substr(0, nl);
  text->remove_prefix(nl == absl::string_view::npos ? text->size() : nl + 1);
  return line;
}

// Splits off the next whitespace-delimited token from *s.
absl::string_view NextToken(absl::string_view* s) {
  *s = absl::StripLeadingAsciiWhitespace(*s);
  size_t end = 0;
  while (end < s->size() && !absl::ascii_isspace((*s)[end])) ++end;
  absl::string_view tok = s->substr(0, end);
  s->remove_prefix(end);
  return tok;
}

// "   1234 kB" -> 1234 * 1024; false unless it is a number (unit optional).
bool ParseKb(absl::string_view value, int64_t* bytes) {
  absl::string_view num = NextToken(&value);
  int64_t kb = 0;
  if (!absl::SimpleAtoi(num, &kb)) return false;
  absl::string_view unit = NextToken(&value);
  *bytes = unit == "kB" ? kb * 1024 : kb;
  return true;
}

// One smaps/maps entry, viewing into the text.
struct Vma {
  uint64_t start = 0;
  uint64_t end = 0;
  absl::string_view range;
  absl::string_view perms;
  absl::string_view path;
  int64_t rss = 0;
  int64_t anon = 0;
  int64_t swap = 0;
  int kind = 0;  // a Kind
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

// A maps/smaps header line starts with a lowercase hex address; smaps field
// lines start with an uppercase key ("Rss:"), so the first byte tells them
// apart. Fills range/perms/path; false if the line is not a header.
bool ParseHeader(absl::string_view line, Vma* vma) {
  if (line.empty() || !(absl::ascii_isdigit(line[0]) ||
                        (line[0] >= 'a' && line[0] <= 'f'))) {
    return false;
  }
  absl::string_view rest = line;
  vma->range = NextToken(&rest);
  size_t dash = vma->range.find('-');
  if (dash == absl::string_view::npos ||
      !absl::SimpleHexAtoi(vma->range.substr(0, dash), &vma->start) ||
      !absl::SimpleHexAtoi(vma->range.substr(dash + 1), &vma->end) ||
      vma->end < vma->start) {
    return false;
  }
  vma->perms = NextToken(&rest);
  NextToken(&rest);  // offset
  NextToken(&rest);  // device
  NextToken(&rest);  // inode
  // The path is the rest of the line and may contain spaces.
  vma->path = absl::StripAsciiWhitespace(rest);
  return vma->perms.size() == 4;
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

absl::StatusOr<std::string> ReadProcFile(int pid, absl::string_view name) {
  const std::string path = ProcPath(pid, name);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  }
  std::string out;
  out.resize(InitialCapacity(name));
  size_t used = 0;
  while (true) {
    if (used == out.size()) out.resize(out.size() * 2);
    ssize_t n = read(fd, &out[used], out.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(used);  // Shrinking keeps the capacity: no reallocation.
  return out;
}

absl::StatusOr<MappedText> MappedText::Read(int pid, absl::string_view name) {
  char path[128];
  ProcPathInto(pid, name, path, sizeof(path));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
  // Generous virtual reservation (procfs reports st_size 0); only the
  // pages read into are ever touched, and mremap grows it if needed.
  MappedText t;
  size_t want = std::max<size_t>(InitialCapacity(name) * 4, 64 << 10);
  void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, "mmap");
  }
  t.data_ = static_cast<char*>(p);
  t.mapped_ = want;
  while (true) {
    if (t.size_ == t.mapped_) {
      void* q = mremap(t.data_, t.mapped_, t.mapped_ * 2, MREMAP_MAYMOVE);
      if (q == MAP_FAILED) {
        int err = errno;
        close(fd);
        return absl::ErrnoToStatus(err, "mremap");
      }
      t.data_ = static_cast<char*>(q);
      t.mapped_ *= 2;
    }
    ssize_t n = read(fd, t.data_ + t.size_, t.mapped_ - t.size_);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("read ", path));
    }
    if (n == 0) break;
    t.size_ += static_cast<size_t>(n);
  }
  close(fd);
  return t;
}

MappedText::~MappedText() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

MappedText::MappedText(MappedText&& other) noexcept
    : data_(other.data_), size_(other.size_), mapped_(other.mapped_) {
  other.data_ = nullptr;
  other.size_ = other.mapped_ = 0;
}

MappedText& MappedText::operator=(MappedText&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = other.data_;
    size_ = other.size_;
    mapped_ = other.mapped_;
    other.data_ = nullptr;
    other.size_ = other.mapped_ = 0;
  }
  return *this;
}

absl::Status ParseStatus(absl::string_view text, rsslab::v1::ProcStatus* out) {
  bool saw_rss = false;
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view key = line.substr(0, colon);
    absl::string_view value = line.substr(colon + 1);
    int64_t v = 0;
    if (key == "Threads") {
      int32_t t = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(value), &t)) {
        out->set_threads(t);
      }
      continue;
    }
    if (!absl::StartsWith(key, "Vm") && !absl::StartsWith(key, "Rss")) continue;
    if (!ParseKb(value, &v)) continue;
    if (key == "VmRSS") {
      out->set_rss_bytes(v);
      saw_rss = true;
    } else if (key == "VmHWM") {
      out->set_hwm_bytes(v);
    } else if (key == "RssAnon") {
      out->set_anon_bytes(v);
    } else if (key == "RssFile") {
      out->set_file_bytes(v);
    } else if (key == "RssShmem") {
      out->set_shmem_bytes(v);
    } else if (key == "VmSize") {
      out->set_vm_size_bytes(v);
    } else if (key == "VmSwap") {
      out->set_swap_bytes(v);
    } else if (key == "VmData") {
      out->set_vm_data_bytes(v);
    }
  }
  if (!saw_rss) {
    return absl::InvalidArgumentError(
        "status has no VmRSS line (kernel thread, zombie, or not a "
        "/proc/PID/status file)");
  }
  return absl::OkStatus();
}

absl::Status ReadStatus(int pid, rsslab::v1::ProcStatus* out) {
  absl::StatusOr<MappedText> text = MappedText::Read(pid, "status");
  if (!text.ok()) return text.status();
  return ParseStatus(text->view(), out);
}

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
  return {"glibc", libc};
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

namespace {

// Calls fn(key, value) for each NAME=value entry of environ text.
template <typename Fn>
void ForEachEnvEntry(absl::string_view text, Fn fn) {
  while (!text.empty()) {
    size_t nul = text.find('\0');
    absl::string_view entry = text.substr(0, nul);
    text.remove_prefix(nul == absl::string_view::npos ? text.size() : nul + 1);
    size_t eq = entry.find('=');
    if (entry.empty() || eq == 0) continue;
    absl::string_view key = entry.substr(0, eq);
    absl::string_view value =
        eq == absl::string_view::npos ? absl::string_view() : entry.substr(eq + 1);
    fn(key, value);
  }
}

bool IsAllocatorVariable(absl::string_view key) {
  static constexpr const char* kExact[] = {"LD_PRELOAD", "GLIBC_TUNABLES",
                                           "JE_MALLOC_CONF", "_RJEM_MALLOC_CONF"};
  static constexpr const char* kPrefixes[] = {"MALLOC_", "MIMALLOC_", "TCMALLOC_",
                                              "PYTHONMALLOC"};
  for (const char* e : kExact) {
    if (key == e) return true;
  }
  for (const char* p : kPrefixes) {
    if (absl::StartsWith(key, p)) return true;
  }
  return false;
}

}  // namespace

std::map<std::string, std::string> ParseEnviron(absl::string_view text) {
  std::map<std::string, std::string> env;
  ForEachEnvEntry(text, [&](absl::string_view key, absl::string_view value) {
    env.emplace(std::string(key), std::string(value));  // first one wins
  });
  return env;
}

absl::StatusOr<std::map<std::string, std::string>> ReadEnviron(int pid) {
  absl::StatusOr<std::string> text = ReadProcFile(pid, "environ");
  if (!text.ok()) return text.status();
  return ParseEnviron(*text);
}

std::map<std::string, std::string> AllocatorEnv(
    const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> kept;
  for (const auto& [key, value] : env) {
    if (IsAllocatorVariable(key)) kept.emplace(key, value);
  }
  return kept;
}

absl::StatusOr<std::map<std::string, std::string>> ReadAllocatorEnv(int pid) {
  absl::StatusOr<MappedText> text = MappedText::Read(pid, "environ");
  if (!text.ok()) return text.status();
  std::map<std::string, std::string> kept;
  ForEachEnvEntry(text->view(), [&](absl::string_view key, absl::string_view value) {
    if (IsAllocatorVariable(key)) kept.emplace(std::string(key), std::string(value));
  });
  return kept;
}

namespace {

// Reads task/TID/<file> relative to the open task directory into buf
// (NUL-free view, trailing newline dropped). False if the thread is gone.
bool ReadTaskFile(int dfd, const char* tid, const char* file, char* buf, size_t size,
                  absl::string_view* out) {
  char rel[64];
  snprintf(rel, sizeof(rel), "%s/%s", tid, file);
  int fd = openat(dfd, rel, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t got;
  do {
    got = read(fd, buf, size);
  } while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0) return false;
  absl::string_view v(buf, static_cast<size_t>(got));
  absl::ConsumeSuffix(&v, "\n");
  *out = v;
  return true;
}

}  // namespace

bool ParseThreadStat(absl::string_view line, ThreadView* out) {
  size_t open = line.find(" (");
  size_t close = line.rfind(')');
  if (open == absl::string_view::npos || close == absl::string_view::npos || close < open) {
    return false;
  }
  int tid = 0;
  if (!absl::SimpleAtoi(line.substr(0, open), &tid)) return false;
  absl::string_view rest = line.substr(close + 1);
  // Fields after the comm, numbered as in proc(5): 3 = state ... 22 = starttime.
  absl::string_view state = NextToken(&rest);
  if (state.size() != 1) return false;
  uint32_t flags = 0;
  uint64_t start = 0;
  int ppid = 0;
  uint64_t minflt = 0;
  for (int field = 4; field <= 22; ++field) {
    absl::string_view tok = NextToken(&rest);
    if (tok.empty()) return false;
    if (field == 4 && !absl::SimpleAtoi(tok, &ppid)) return false;
    if (field == 10 && !absl::SimpleAtoi(tok, &minflt)) return false;
    if (field == 9 && !absl::SimpleAtoi(tok, &flags)) return false;
    if (field == 22 && !absl::SimpleAtoi(tok, &start)) return false;
  }
  out->tid = tid;
  out->comm = line.substr(open + 2, close - open - 2);
  out->state = state[0];
  out->flags = flags;
  out->start_ticks = start;
  out->ppid = ppid;
  out->minflt = minflt;
  return true;
}

absl::Status ForEachThread(int pid, int fields,
                           absl::FunctionRef<void(const ThreadView&)> fn, ThreadScan* scan,
                           int max_threads) {
  // getdents64 into a stack buffer and openat() relative to the directory:
  // opendir would malloc a 32 KiB buffer, and path strings more. The
  // server's census runs this inside the process it measures.
  char dir[64];
  ProcPathInto(pid, "task", dir, sizeof(dir));
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("open ", dir));
  }
  ThreadScan local;
  ThreadScan& sc = scan != nullptr ? *scan : local;
  sc = ThreadScan();
  alignas(8) char buf[4096];
  char comm_buf[64];
  char stat_buf[1024];  // a stat line is ~350 bytes; its comm at most 64
  char wchan_buf[128];
  int delivered = 0;
  while (!sc.truncated) {
    long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));  // NOLINT(runtime/int)
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (long off = 0; off < n;) {  // NOLINT(runtime/int)
      // struct linux_dirent64: d_ino(8) d_off(8) d_reclen(2) d_type(1) d_name
      unsigned short reclen;  // NOLINT(runtime/int)
      memcpy(&reclen, buf + off + 16, sizeof(reclen));
      const char* name = buf + off + 19;
      off += reclen;
      if (name[0] == '.') continue;
      if (delivered >= max_threads) {
        sc.truncated = true;
        break;
      }
      ++sc.listed;
      ThreadView t;
      if (!absl::SimpleAtoi(name, &t.tid)) continue;
      bool ok = true;
      if (fields & kThreadStat) {
        absl::string_view line;
        ok = ReadTaskFile(dfd, name, "stat", stat_buf, sizeof(stat_buf), &line) &&
             ParseThreadStat(line, &t);
      } else if (fields & kThreadComm) {
        ok = ReadTaskFile(dfd, name, "comm", comm_buf, sizeof(comm_buf), &t.comm);
      }
      if (ok && (fields & kThreadWchan)) {
        ok = ReadTaskFile(dfd, name, "wchan", wchan_buf, sizeof(wchan_buf), &t.wchan);
      }
      if (!ok) {
        ++sc.vanished;  // the thread exited meanwhile
        continue;
      }
      ++delivered;
      fn(t);
    }
  }
  close(dfd);
  return absl::OkStatus();
}

absl::Status ThreadCensus(
    int pid, google::protobuf::RepeatedPtrField<rsslab::v1::ThreadName>* out) {
  // Distinct comm names are few (15 in a 64-worker server: workers are
  // counted per name); a comm is at most 15 bytes, inside std::string's
  // small buffer, so each name costs one map node.
  std::map<std::string, int32_t> counts;
  absl::Status s = ForEachThread(pid, kThreadComm, [&](const ThreadView& t) {
    ++counts[std::string(t.comm)];
  });
  if (!s.ok()) return s;
  std::vector<std::pair<std::string, int32_t>> sorted(counts.begin(),
                                                      counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  out->Clear();
  for (auto& [name, count] : sorted) {
    rsslab::v1::ThreadName* t = out->Add();
    t->set_comm(name);
    t->set_count(count);
  }
  return absl::OkStatus();
}

int CountCpuList(absl::string_view list) {
  list = absl::StripAsciiWhitespace(list);
  if (list.empty() || list.back() == ',') return -1;
  int total = 0;
  while (!list.empty()) {
    size_t comma = list.find(',');
    absl::string_view part = list.substr(0, comma);
    list.remove_prefix(comma == absl::string_view::npos ? list.size() : comma + 1);
    size_t dash = part.find('-');
    int lo = 0, hi = 0;
    if (dash == absl::string_view::npos) {
      if (!absl::SimpleAtoi(part, &lo)) return -1;
      hi = lo;
    } else if (!absl::SimpleAtoi(part.substr(0, dash), &lo) ||
               !absl::SimpleAtoi(part.substr(dash + 1), &hi)) {
      return -1;
    }
    if (lo < 0 || hi < lo || hi - lo > (1 << 20)) return -1;
    total += hi - lo + 1;
  }
  return total;
}

absl::string_view StatusField(absl::string_view text, absl::string_view key) {
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    if (line.size() > key.size() && absl::StartsWith(line, key) && line[key.size()] == ':') {
      return absl::StripAsciiWhitespace(line.substr(key.size() + 1));
    }
  }
  return absl::string_view();
}

}  // namespace procfs
}  // namespace rsslab
