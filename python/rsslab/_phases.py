"""on_phase() and cache_stats(): the service's hooks, and what the native
Control service calls back into Python for (SetPhase's callback, a
snapshot's Python part)."""

import gc
import sys
import threading
import time

from . import _callbacks, _serve, _threads
from . import _rsslab as _native

_lock = threading.Lock()
_phase_callbacks = {}
_phase = "start"
_cache_stats_fn = None

# A snapshot's Python part has 2 s in all (the GIL wait included): the
# service's cache_stats gets half.
_CACHE_STATS_TIMEOUT_S = 1.0

# The one table (common/phase.h), from the native half.
_PHASES = tuple(_native.phases())


def on_phase(name, fn):
    """Calls fn(cache_limit_bytes) when a Control client sets phase `name`.

    cache_limit_bytes is the request's limit, else 100 MiB for fill and
    10 MiB for shrink, else None. fn=None unregisters.
    """
    if name not in _PHASES:
        raise ValueError("on_phase(name) must be one of %s; got %r" % (", ".join(_PHASES), name))
    if fn is not None and not callable(fn):
        raise TypeError("on_phase(fn) must be callable or None")
    with _lock:
        if fn is None:
            _phase_callbacks.pop(name, None)
        else:
            _phase_callbacks[name] = fn


def cache_stats(fn):
    """fn() -> {"entries", "bytes", "limit_bytes", "evictions", "evicted_bytes",
    "puts", "hits", "misses"} (any subset): the
    service's cache figures in snapshots (Snapshot.cache). None removes it."""
    global _cache_stats_fn
    if fn is not None and not callable(fn):
        raise TypeError("cache_stats(fn) must be callable or None")
    _cache_stats_fn = fn


def _set_phase(name, limit, timeout=None):
    """SetPhase from the Control service (native side, GIL held): (previous
    phase, why no callback ran or ""). The callback is waited for at most
    `timeout` s (TimeoutError past it)."""
    global _phase
    with _lock:
        fn = _phase_callbacks.get(name)
        registered = sorted(_phase_callbacks)
    note = ""
    if fn is not None:
        _callbacks._bounded("the on_phase callback for '%s'" % name, fn, (None if limit < 0 else limit,),
                 2.0 if timeout is None else timeout)
    elif name != "trim":
        # A service with no cache: the phase still labels the loadgen's
        # records, and the answer says nothing ran (trim releases anyway).
        note = ("no callback for phase '%s': this service registered %s "
                "(rsslab.on_phase(name, fn)); the phase only labels the records"
                % (name, ", ".join(registered) if registered else "none"))
    previous, _phase = _phase, name
    return previous, note


def _snapshot_part(run_gc):
    """The Python part of a snapshot (called by the native side, GIL held)."""
    gc_us = 0
    collected = 0
    if run_gc:
        t0 = time.perf_counter()
        collected = gc.collect()
        gc_us = int((time.perf_counter() - t0) * 1e6)
    cache = None
    fn = _cache_stats_fn
    if fn is not None:
        try:
            cache = dict(_callbacks._bounded("the cache_stats callback", fn, (), _CACHE_STATS_TIMEOUT_S))
        except Exception as e:  # noqa: BLE001 - a snapshot never fails for it
            print("rsslab: cache_stats callback: %s" % _native.echo(repr(e), 256),
                  file=sys.stderr)
    threads, alive = _threads._worker_counts()
    return {
        "phase": _phase,
        "gc_duration_us": gc_us,
        "python": {
            "version": sys.version.split()[0],
            "allocated_blocks": sys.getallocatedblocks(),
            "gc_counts": list(gc.get_count()),
            "gc_collected": collected,
            "executable": sys.executable,
        },
        "cache": cache,
        "workers": {"configured": threads, "alive": alive},
        "threads": threads,
        "control_address": _serve.control_address(),
    }


def _after_fork_in_child():
    global _lock
    _lock = threading.Lock()
