// ParseMallocInfo: a small scanner for the fixed XML dialect glibc's
// malloc_info(3) prints (flat elements, double-quoted attributes, no text,
// no entities). A general XML parser would allocate far more than the
// snapshot it serves; this one allocates only the GlibcArena messages.
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/mman.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "memory/alloc/malloc_info.h"

namespace rsslab {
namespace alloc {
namespace {

struct Tag {
  absl::string_view name;   // "heap", "total", ...
  absl::string_view attrs;  // raw attribute text
  bool closing = false;     // </name>
  bool self_closing = false;
};

// Value of attribute `key` in raw attribute text, or false if absent.
bool Attr(absl::string_view attrs, absl::string_view key, absl::string_view* value) {
  size_t pos = 0;
  while (pos < attrs.size()) {
    size_t eq = attrs.find("=\"", pos);
    if (eq == absl::string_view::npos) return false;
    size_t start = eq;
    while (start > pos && attrs[start - 1] != ' ') --start;
    size_t close = attrs.find('"', eq + 2);
    if (close == absl::string_view::npos) return false;
    if (attrs.substr(start, eq - start) == key) {
      *value = attrs.substr(eq + 2, close - eq - 2);
      return true;
    }
    pos = close + 1;
  }
  return false;
}

absl::Status IntAttr(const Tag& tag, absl::string_view key, int64_t* out) {
  absl::string_view v;
  if (!Attr(tag.attrs, key, &v) || !absl::SimpleAtoi(v, out)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "malloc_info: <", tag.name, "> lacks a numeric ", key, " attribute"));
  }
  return absl::OkStatus();
}

// Reads the tag starting at or after *pos; false at the end of input.
absl::StatusOr<bool> NextTag(absl::string_view xml, size_t* pos, Tag* tag) {
  size_t lt = xml.find('<', *pos);
  if (lt == absl::string_view::npos) {
    *pos = xml.size();
    return false;
  }
  size_t gt = xml.find('>', lt);
  if (gt == absl::string_view::npos) {
    return absl::InvalidArgumentError("malloc_info: unterminated tag");
  }
  absl::string_view body = xml.substr(lt + 1, gt - lt - 1);
  *pos = gt + 1;
  *tag = Tag();
  if (!body.empty() && body[0] == '/') {
    tag->closing = true;
    body.remove_prefix(1);
  }
  if (!body.empty() && body.back() == '/') {
    tag->self_closing = true;
    body.remove_suffix(1);
  }
  size_t sp = body.find(' ');
  tag->name = body.substr(0, sp);
  tag->attrs = sp == absl::string_view::npos ? absl::string_view() : body.substr(sp + 1);
  if (tag->name.empty()) {
    return absl::InvalidArgumentError("malloc_info: empty tag name");
  }
  return true;
}

// What the scan has seen so far, and the figures it is adding up.
struct Scan {
  rsslab::v1::GlibcStats* out;
  bool in_malloc = false;
  bool closed = false;                     // </malloc> seen: the end
  rsslab::v1::GlibcArena* heap = nullptr;  // the open <heap>, if any
  int64_t heap_free = 0, heap_chunks = 0;  // the open heap's free chunks
  int64_t top_free = 0;                    // free bytes outside every <heap>
};

void ClearStats(rsslab::v1::GlibcStats* out) {
  out->clear_arenas();
  out->set_malloc_info_arenas(0);
  out->set_total_system_bytes(0);
  out->set_total_free_bytes(0);
  out->set_mmap_count(0);
  out->set_mmap_bytes(0);
}

// <malloc> opens the document, </malloc> ends it (scan->closed).
absl::Status OnMalloc(const Tag& tag, Scan* scan) {
  if (tag.closing) {
    if (!scan->in_malloc || scan->heap != nullptr) {
      return absl::InvalidArgumentError("malloc_info: misplaced </malloc>");
    }
    scan->closed = true;
    return absl::OkStatus();
  }
  if (scan->in_malloc) return absl::InvalidArgumentError("malloc_info: nested <malloc>");
  scan->in_malloc = true;
  return absl::OkStatus();
}

// <heap nr="N"> opens an arena; </heap> sets its free and in-use bytes from
// the free chunks counted inside it.
absl::Status OnHeap(const Tag& tag, Scan* scan) {
  if (tag.closing) {
    if (scan->heap == nullptr) return absl::InvalidArgumentError("malloc_info: stray </heap>");
    scan->heap->set_free_bytes(scan->heap_free);
    scan->heap->set_free_chunks(scan->heap_chunks);
    scan->heap->set_in_use_bytes(scan->heap->system_bytes() - scan->heap_free);
    scan->heap = nullptr;
    return absl::OkStatus();
  }
  if (scan->heap != nullptr) return absl::InvalidArgumentError("malloc_info: nested <heap>");
  int64_t nr = 0;
  if (absl::Status s = IntAttr(tag, "nr", &nr); !s.ok()) return s;
  scan->heap = scan->out->add_arenas();
  scan->heap->set_nr(static_cast<int32_t>(nr));
  scan->heap_free = scan->heap_chunks = 0;
  return absl::OkStatus();
}

// <total type="fast|rest" count size>: free chunks, the open heap's or
// outside every heap; type="mmap" outside a heap: the mmap'ed chunks.
absl::Status OnTotal(const Tag& tag, absl::string_view type, Scan* scan) {
  int64_t count = 0, size = 0;
  if (absl::Status s = IntAttr(tag, "count", &count); !s.ok()) return s;
  if (absl::Status s = IntAttr(tag, "size", &size); !s.ok()) return s;
  if (type == "fast" || type == "rest") {
    if (scan->heap != nullptr) {
      scan->heap_free += size;
      scan->heap_chunks += count;
    } else {
      scan->top_free += size;
    }
  } else if (type == "mmap" && scan->heap == nullptr) {
    scan->out->set_mmap_count(count);
    scan->out->set_mmap_bytes(size);
  }
  return absl::OkStatus();
}

// <system type="current|max" size>: the open heap's, or (current) the total.
absl::Status OnSystem(const Tag& tag, absl::string_view type, Scan* scan) {
  int64_t size = 0;
  if (absl::Status s = IntAttr(tag, "size", &size); !s.ok()) return s;
  if (type == "current") {
    if (scan->heap != nullptr) {
      scan->heap->set_system_bytes(size);
    } else {
      scan->out->set_total_system_bytes(size);
    }
  } else if (type == "max" && scan->heap != nullptr) {
    scan->heap->set_max_system_bytes(size);
  }
  return absl::OkStatus();
}

// <aspace type="total" size>: the open heap's address space.
absl::Status OnAspace(const Tag& tag, absl::string_view type, Scan* scan) {
  int64_t size = 0;
  if (absl::Status s = IntAttr(tag, "size", &size); !s.ok()) return s;
  if (type == "total" && scan->heap != nullptr) scan->heap->set_aspace_bytes(size);
  return absl::OkStatus();
}

// Any other element inside <malloc>: a figure with a type, or a part of the
// free-chunk histogram.
absl::Status OnFigure(const Tag& tag, Scan* scan) {
  if (tag.closing) return absl::OkStatus();  // </sizes>
  absl::string_view type;
  if (tag.name == "total" || tag.name == "system" || tag.name == "aspace") {
    if (!Attr(tag.attrs, "type", &type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("malloc_info: <", tag.name, "> without type"));
    }
  }
  if (tag.name == "total") return OnTotal(tag, type, scan);
  if (tag.name == "system") return OnSystem(tag, type, scan);
  if (tag.name == "aspace") return OnAspace(tag, type, scan);
  // <sizes>, <size>, <unsorted>: the free-chunk histogram, not needed.
  return absl::OkStatus();
}

// One element: <malloc> first, nothing outside it, then heaps and figures.
absl::Status OnTag(const Tag& tag, Scan* scan) {
  if (tag.name == "malloc") return OnMalloc(tag, scan);
  if (!scan->in_malloc) {
    return absl::InvalidArgumentError(
        absl::StrCat("malloc_info: <", tag.name, "> outside <malloc>"));
  }
  if (tag.name == "heap") return OnHeap(tag, scan);
  return OnFigure(tag, scan);
}

}  // namespace

absl::Status ParseMallocInfo(absl::string_view xml, rsslab::v1::GlibcStats* out) {
  ClearStats(out);
  Scan scan{out};
  size_t pos = 0;
  Tag tag;
  while (!scan.closed) {
    absl::StatusOr<bool> more = NextTag(xml, &pos, &tag);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (absl::Status s = OnTag(tag, &scan); !s.ok()) return s;
  }
  if (!scan.closed) {
    return absl::InvalidArgumentError(
        scan.in_malloc ? "malloc_info: truncated (no </malloc>)"
                       : "malloc_info: no <malloc> element");
  }
  out->set_total_free_bytes(scan.top_free);
  out->set_malloc_info_arenas(out->arenas_size());
  return absl::OkStatus();
}

absl::Status ReadMallocInfo(rsslab::v1::GlibcStats* out) {
  // The XML (~2 KiB per arena) is written into an mmap'd buffer through a
  // stdio buffer carved from the same mapping, so the probe costs the heap
  // only fmemopen's FILE. Pages never written are never touched.
  constexpr size_t kIoBuf = 64 << 10;
  for (size_t size = 4 << 20; size <= (256u << 20); size *= 4) {
    void* mem = mmap(nullptr, size + kIoBuf, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap");
    char* buf = static_cast<char*>(mem);
    FILE* fp = fmemopen(buf, size, "w");
    if (fp == nullptr) {
      int err = errno;
      munmap(mem, size + kIoBuf);
      return absl::ErrnoToStatus(err, "fmemopen");
    }
    setvbuf(fp, buf + size, _IOFBF, kIoBuf);
    int rc = malloc_info(0, fp);
    fflush(fp);
    long n = ftell(fp);  // NOLINT(runtime/int): stdio's type
    fclose(fp);
    absl::Status status;
    bool full = n < 0 || static_cast<size_t>(n) >= size - 1;
    if (rc != 0) {
      status = absl::InternalError("malloc_info failed");
    } else if (!full) {
      status = ParseMallocInfo(absl::string_view(buf, static_cast<size_t>(n)), out);
    }
    munmap(mem, size + kIoBuf);
    if (rc != 0 || !full) return status;
  }
  return absl::ResourceExhaustedError("malloc_info XML larger than 256 MiB");
}

}  // namespace alloc
}  // namespace rsslab
