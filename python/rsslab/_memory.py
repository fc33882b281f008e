"""allocator(), snapshot(), release() and cap_arenas(): the allocator that
serves malloc here, this process's memory, and giving it back."""

import os

from . import _rsslab as _native
from ._checks import _check_int, _check_number

# The one table (common/trim_modes.h), from the native half.
_MODES = dict(_native.trim_modes())
_MODES["global_only"] = _MODES["global"]  # the enum's own word, also taken


class ArenaCapError(RuntimeError):
    """cap_arenas() could not take effect; the message says why and what to do."""


def allocator():
    """The allocator serving malloc in this process, and the start environment.

    Keys: name (glibc | jemalloc | mimalloc | tcmalloc), version, library,
    maps (what /proc/self/maps shows mapped), malloc_from (the library
    malloc resolves to), start_env (allocator variables the process started
    with, from /proc/self/environ), arena_cap, and warnings: one line for
    every such variable whose os.environ value differs from the start (set
    after start: it has no effect).
    """
    info = _native.allocator()
    start = info["start_env"]
    names = set(start) | {k for k in os.environ if _native.is_allocator_variable(k)}
    warnings = []
    for name in sorted(names):
        then, now = start.get(name), os.environ.get(name)
        if then == now:
            continue
        if then is None:
            warnings.append("%s=%s is in os.environ but the process started without it: set "
                            "after start: it has no effect (set it before the process starts)"
                            % (name, now))
        elif now is None:
            warnings.append("%s was removed from os.environ after start: the allocator still "
                            "runs with %s=%s" % (name, name, then))
        else:
            warnings.append("%s=%s in os.environ differs from the start value %s: set after "
                            "start: it has no effect" % (name, now, then))
    info["warnings"] = warnings
    return info


def snapshot(gc=False, detail=False):
    """A dict shaped like Control's Snapshot (protobuf JSON names: rssBytes...).

    gc=True runs gc.collect() first; detail=True adds the largest mappings.
    """
    if not isinstance(gc, bool) or not isinstance(detail, bool):
        raise TypeError("snapshot(gc=, detail=) take booleans")
    return _native.snapshot(gc, detail)


def _summary(r, mode):
    reached = [w["tid"] for w in r["workers"] if w["ran"]]
    missed = [w["tid"] for w in r["workers"] if not w["ran"]]
    return {
        "allocator": r["allocator"],
        "mode": mode,
        "call": r["call"],
        "thread_call": r["threadCall"],
        "rss_before": r["rssBeforeBytes"],
        "rss_after": r["rssAfterBytes"],
        "freed": r["freedBytes"],
        "duration_s": (r["trimDurationUs"] + r["perThreadDurationUs"]) / 1e6,
        "max_thread_pause_s": r["maxWorkerPauseUs"] / 1e6,
        "threads_reached": len(reached),
        "threads_not_reached": missed,
        # mimalloc 2.0.x and 3.x: pages inside free blocks returned on each thread
        # (bytes madvise covered; the RSS figures above show the effect).
        "purged_free_blocks": r.get("freeBlockPurge", {}).get("bytes", 0),
        # Workers counted as reached without a visit: they ran nothing
        # since their last one, so their heaps have not changed.
        "threads_clean": r.get("threadsClean", 0),
        "result": r,
    }


def release(mode="default", timeout=2.0):
    """Gives free memory back through whichever allocator is loaded.

    mode: "default" (global release plus every tracked thread; on mimalloc
    each thread then returns the pages inside its heap's free blocks where a
    look finds enough to), "purge" (that walk on every thread), "global",
    "per_thread": what rsslab_ctl trim --mode= names, the same in
    rsslab_server. timeout: seconds to wait for busy tracked threads; those
    still busy are listed in threads_not_reached. Returns rss_before,
    rss_after, freed (bytes), duration_s, threads_reached,
    threads_not_reached and the full TrimResult under "result". The GIL is
    not held while the allocator releases or while threads are waited for.
    """
    if mode not in _MODES:
        raise ValueError("release(mode=) must be one of %s; got %r"
                         % (", ".join(n for n, _ in _native.trim_modes()), mode))
    timeout = _check_number("release(timeout=)", timeout, 0.001, 600)
    return _summary(_native.release(_MODES[mode], timeout, "manual"), mode)


def cap_arenas(n):
    """mallopt(M_ARENA_MAX, n), applied only where it takes effect.

    Under glibc, before the arena limit is fixed (at import, before worker
    threads allocate), it returns a dict saying so. Too late, under another
    allocator, or when it cannot be checked, it raises ArenaCapError saying
    why and what to do instead.
    """
    n = _check_int("cap_arenas(n)", n, 1, 1024)
    try:
        return _native.cap_arenas(n)
    except ValueError as e:
        raise ArenaCapError(str(e)) from None
