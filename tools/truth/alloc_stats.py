"""The allocator's own statistics, read in-process through ctypes: the same
figures rsslab_server's snapshots report (memory/alloc/alloc.cc), for the
reference worker, so a difference between the two processes can be placed
(live blocks, pages the allocator holds resident, retained address space).

  glibc     mallinfo2(): arena, hblkhd, uordblks, fordblks, keepcost
  jemalloc  mallctl: "epoch" bumped, then stats.allocated, .active,
            .resident, .retained, .mapped, .metadata
  mimalloc  mi_process_info (current/peak commit and RSS; one signature in
            2.0.9 and 3.0.1) and mi_version; mi_stats_print_out's "pages"
            and "-abandoned" current counts (the printing thread's view plus
            what exited threads merged: a release build keeps page counts per
            thread)
  tcmalloc  MallocExtension_GetNumericProperty: generic.current_allocated_bytes,
            generic.heap_size, tcmalloc.pageheap_free_bytes,
            tcmalloc.pageheap_unmapped_bytes

Which allocator is loaded comes from /proc/self/maps (the preloaded
library's name), as the server's snapshot names it. read() returns
{"allocator": name, <figure>: bytes, ...} or {"allocator": name, "note": why}.
"""

import ctypes
import re

_LIBC = ctypes.CDLL(None)  # the global namespace: an LD_PRELOADed allocator first
_SIZE = ctypes.c_size_t


def loaded_allocator():
    with open("/proc/self/maps") as f:
        maps = f.read()
    for name in ("jemalloc", "mimalloc", "tcmalloc"):
        if re.search(r"/lib%s[^/\s]*\.so" % name, maps):
            return name
    return "glibc"


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, _SIZE) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _glibc():
    fn = _LIBC.mallinfo2
    fn.restype = _Mallinfo2
    mi = fn()
    return {k: int(getattr(mi, k)) for k in ("arena", "hblkhd", "uordblks", "fordblks", "keepcost")}


def _jemalloc():
    mallctl = _LIBC.mallctl
    mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(_SIZE), ctypes.c_void_p,
                        _SIZE]
    epoch = ctypes.c_uint64(1)
    n = _SIZE(ctypes.sizeof(epoch))
    # stats.* are a snapshot taken at the last epoch bump.
    mallctl(b"epoch", ctypes.byref(epoch), ctypes.byref(n), ctypes.byref(epoch), n)
    out = {}
    for key in ("allocated", "active", "resident", "retained", "mapped", "metadata"):
        v, n = _SIZE(0), _SIZE(ctypes.sizeof(_SIZE))
        if mallctl(("stats." + key).encode(), ctypes.byref(v), ctypes.byref(n), None, 0) != 0:
            return {"note": "mallctl stats.%s failed" % key}
        out[key] = int(v.value)
    return out


_MI_LINE = re.compile(r"^\s*(-?[a-z]+):\s+(.*)$")


def _mimalloc():
    out = {"version": int(_LIBC.mi_version())}
    vals = [_SIZE(0) for _ in range(8)]
    _LIBC.mi_process_info(*[ctypes.byref(v) for v in vals])
    for i, key in ((3, "current_rss"), (4, "peak_rss"), (5, "current_commit"),
                   (6, "peak_commit")):
        # Signed: a release build counts commits per thread and merges them
        # late, so the reading thread's sum can be below zero (seen under
        # mimalloc 3.0.1 with purges on: -5.9 GiB).
        out[key] = ctypes.c_int64(vals[i].value).value
    if out["current_commit"] < 0:  # 3.0.1 with purges: not a figure to compare
        del out["current_rss"], out["current_commit"]
        out["note"] = "mi_process_info commit below zero (per-thread counts not merged)"
    text = []
    cb = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_void_p)(
        lambda s, _: text.append(s.decode(errors="replace")))
    _LIBC.mi_stats_print_out(cb, None)
    section = ""
    for line in "".join(text).splitlines():
        m = _MI_LINE.match(line)
        if not m:
            continue
        name, cols = m.group(1), m.group(2).split()
        if not name.startswith("-"):
            section = name
        # peak total freed current: the 4th figure is "current" (a count here).
        if section == "pages" and name in ("pages", "-abandoned") and len(cols) >= 4:
            try:
                out["pages" if name == "pages" else "pages_abandoned"] = int(cols[3])
            except ValueError:
                pass
    return out


def _tcmalloc():
    get = _LIBC.MallocExtension_GetNumericProperty
    get.argtypes = [ctypes.c_char_p, ctypes.POINTER(_SIZE)]
    out = {}
    for key, prop in (("current_allocated_bytes", "generic.current_allocated_bytes"),
                      ("heap_size", "generic.heap_size"),
                      ("pageheap_free_bytes", "tcmalloc.pageheap_free_bytes"),
                      ("pageheap_unmapped_bytes", "tcmalloc.pageheap_unmapped_bytes")):
        v = _SIZE(0)
        if get(prop.encode(), ctypes.byref(v)):
            out[key] = int(v.value)
    return out


_READERS = {"glibc": _glibc, "jemalloc": _jemalloc, "mimalloc": _mimalloc, "tcmalloc": _tcmalloc}


def _mallctl_void(name):
    mallctl = _LIBC.mallctl
    mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(_SIZE), ctypes.c_void_p,
                        _SIZE]
    return mallctl(name, None, None, None, 0)


# mimalloc's delay option (decommit_delay in 2.0.x, purge_delay in 2.1+ and
# 3.x: the same slot, memory/alloc/alloc.cc's layouts).
_MI_DELAY = 15


def _mi_thread_release():
    _LIBC.mi_collect(ctypes.c_bool(True))
    # 2.0.x decommits a segment's freed spans when its own thread next
    # allocates a page there (the server's follow-up does the same).
    _LIBC.mi_malloc.restype = ctypes.c_void_p
    _LIBC.mi_free.argtypes = [ctypes.c_void_p]
    _LIBC.mi_free(_LIBC.mi_malloc(_SIZE(256 << 10)))


# What rsslab_server's default trim does (memory/trim, docs/SERVER.md's
# table), for the reference's start record: each thread's own part on that
# thread, between release_begin and release_end (the process-wide part).
_THREAD_RELEASE = {
    "glibc": lambda: None,  # malloc_trim walks every arena
    "jemalloc": lambda: _mallctl_void(b"thread.tcache.flush"),
    "mimalloc": _mi_thread_release,
    "tcmalloc": lambda: _LIBC.MallocExtension_MarkThreadIdle(),
}
_GLOBAL_RELEASE = {
    "glibc": lambda: _LIBC.malloc_trim(_SIZE(0)),
    "jemalloc": lambda: _mallctl_void(b"arena.4096.purge"),  # MALLCTL_ARENAS_ALL
    "mimalloc": lambda: _LIBC.mi_collect(ctypes.c_bool(True)),
    "tcmalloc": lambda: _LIBC.MallocExtension_ReleaseFreeMemory(),
}


def release_begin(allocator):
    """Before the threads' releases: mimalloc's delay held at 0 (as the
    server holds it) so what they free is returned at once. Returns what
    release_end restores."""
    if allocator != "mimalloc":
        return None
    _LIBC.mi_option_get.restype = ctypes.c_long
    old = _LIBC.mi_option_get(_MI_DELAY)
    _LIBC.mi_option_set(_MI_DELAY, ctypes.c_long(0))
    return old


def release_thread(allocator):
    """The calling thread's cache or heap given back (jemalloc's tcache,
    mimalloc's heap, tcmalloc's thread cache)."""
    _THREAD_RELEASE[allocator]()


def release_end(allocator, saved):
    """After every thread's: the delay restored, then what every thread freed
    returned to the system."""
    if allocator == "mimalloc" and saved is not None:
        _LIBC.mi_option_set(_MI_DELAY, ctypes.c_long(saved))
    _GLOBAL_RELEASE[allocator]()


def read(allocator):
    """This process's allocator figures now (allocator: loaded_allocator()'s)."""
    try:
        stats = _READERS[allocator]()
    except (AttributeError, OSError) as e:  # a symbol this build does not export
        stats = {"note": "%s statistics not read: %s" % (allocator, e)}
    stats["allocator"] = allocator
    return stats
