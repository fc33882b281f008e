"""rsslab inside a Python service: where resident memory is, and giving it back.

Five lines for a grpcio service (docs/PACKAGE.md):

    import rsslab
    rsslab.cap_arenas(2)                       # at import, before threads exist
    pool = rsslab.track(futures.ThreadPoolExecutor(max_workers=16))
    server = grpc.server(pool, interceptors=[rsslab.grpc_interceptor()])
    rsslab.auto_trim("after_burst"); rsslab.serve("127.0.0.1:0")

The figures and releases come from the same C++ libraries as rsslab_server
(memory/alloc, memory/trim, memory/snapshot, common/procfs) through the
native module rsslab._native; this file checks arguments and keeps the
Python-side registries (tracked executors, phase callbacks).
"""

import atexit
import concurrent.futures
import gc
import math
import numbers
import os
import sys
import threading
import time
import weakref
from concurrent.futures import thread as _cf_thread

from . import _rsslab as _native

__version__ = "0.1.0"

__all__ = [
    "ArenaCapError", "allocator", "snapshot", "release", "track", "track_all",
    "cap_arenas", "auto_trim", "count_request", "grpc_interceptor", "serve", "control_transport",
    "on_phase", "cache_stats", "control_address", "metrics_address", "stop",
]


class ArenaCapError(RuntimeError):
    """cap_arenas() could not take effect; the message says why and what to do."""


_lock = threading.Lock()
_owed_lock = threading.Lock()  # the idle counts _submit_one owed a pool
_executors = weakref.WeakSet()
_phase_callbacks = {}
_phase = "start"
_cache_stats_fn = None
_control_address = ""
_metrics_address = ""
_stopped = False

# A snapshot's Python part has 2 s in all (the GIL wait included): the
# service's cache_stats gets half.
_CACHE_STATS_TIMEOUT_S = 1.0

# The one tables (common/trim_modes.h, common/phase.h), from the native half.
_MODES = dict(_native.trim_modes())
_MODES["global_only"] = _MODES["global"]  # the enum's own word, also taken
_PHASES = tuple(_native.phases())


def _check_number(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("%s must be a number, got %s" % (name, type(value).__name__))
    if not (math.isfinite(value) and low <= value <= high):
        raise ValueError("%s must be between %s and %s, got %r" % (name, low, high, value))
    return float(value)


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an int, got %s" % (name, type(value).__name__))
    if not low <= value <= high:
        raise ValueError("%s must be between %d and %d, got %d" % (name, low, high, value))
    return int(value)


# --- tracked threads -------------------------------------------------------

def _live_threads(executor):
    return [t for t in list(getattr(executor, "_threads", ())) if t.is_alive() and t.native_id]


def _target_tids():
    tids = []
    for ex in list(_executors):
        tids.extend(t.native_id for t in _live_threads(ex))
    return tids


def _work_item(executor, task):
    # 3.14's _WorkItem takes (future, task), the task made by the executor
    # (the work of InterpreterPoolExecutor); before 3.14 (future, fn, args, kwargs).
    resolve = getattr(executor, "_resolve_work_item_task", None)
    if resolve is not None:
        return _cf_thread._WorkItem(concurrent.futures.Future(), resolve(*task))
    return _cf_thread._WorkItem(concurrent.futures.Future(), *task)


def _submit_one(executor):
    # Straight into the executor's queue, as submit() would put it, without
    # submit()'s thread start: submit() starts a new worker whenever it
    # sees no idle one, so releases under load would grow the pool to its
    # maximum (and a visit task is not the service's work: no NoteWork).
    task = (_visit_task, (weakref.ref(executor),), {})
    try:
        with executor._shutdown_lock:
            if executor._shutdown or executor._broken or _cf_thread._shutdown:
                return False
            executor._work_queue.put(_work_item(executor, task))
            if not executor._idle_semaphore.acquire(timeout=0):
                # No idle worker was claimed for it, yet the one that runs it
                # gives the pool's idle count one back when done, as after any
                # item: the pool would then count a worker idle that is not,
                # and submit() skip a thread it needs (work waits in the queue
                # behind long calls). Owed back when the next item starts.
                with _owed_lock:
                    executor.__dict__["_rsslab_owed"] = executor.__dict__.get("_rsslab_owed", 0) + 1
        return True
    except AttributeError:  # not the standard library's internals: its own submit
        try:
            type(executor).submit(executor, task[0], *task[1])
            return True
        except RuntimeError:  # shut down: its threads are gone or going
            return False


def _repay(executor):
    # At the start of an item: takes back an idle count _submit_one owed.
    if executor is not None and executor.__dict__.get("_rsslab_owed"):
        with _owed_lock:
            if executor.__dict__.get("_rsslab_owed") and executor._idle_semaphore.acquire(timeout=0):
                executor.__dict__["_rsslab_owed"] -= 1


def _visit_task(ref):
    # Runs the pass's release if this worker owes one, then stays off the
    # queue (no GIL) while other visit tasks are still in it, so that no
    # worker takes two. True: this worker owed nothing and took what may
    # have been another's task; it puts one more in, then waits for it to
    # be taken by another thread.
    _repay(ref())
    if _native.visit(True):
        ex = ref()
        if ex is not None and _submit_one(ex):
            _native.hold()


def _count_work(executor):
    """Makes `executor.submit` tell the native side that work arrived, so
    that workers a release holds off the queue go back to it at once."""
    if "submit" in vars(executor):
        return
    ref = weakref.ref(executor)  # no cycle through the instance's own dict
    submit = type(executor).submit
    note = _native.note_work

    def counted_submit(fn, /, *args, **kwargs):
        note()
        return submit(ref(), _marked, ref, fn, args, kwargs)

    counted_submit.__doc__ = submit.__doc__
    executor.submit = counted_submit


def _marked(ref, fn, args, kwargs):
    # This worker's heap may change: the next release visits it (a worker
    # that ran nothing since its last visit is not visited again).
    _native.mark_ran()
    ex = ref()
    if ex is not None and ex.__dict__.get("_rsslab_owed"):  # _repay's test, inline: every item
        _repay(ex)
    return fn(*args, **kwargs)


def _add(executor):
    _count_work(executor)
    _executors.add(executor)


def _submit_visits(tids):
    # One visit task per listed worker, into the executor it belongs to.
    want = set(tids)
    n = 0
    for ex in list(_executors):
        for t in _live_threads(ex):
            if t.native_id in want:
                n += _submit_one(ex)
    return n


def track(executor):
    """Returns `executor`; release() then reaches each of its worker threads.

    The per-thread part of a release (jemalloc's tcache flush, mimalloc's
    heap collect, tcmalloc's thread cache) can only run on the thread that
    holds the memory: for a tracked ThreadPoolExecutor it runs as one task
    per worker, or right after a request with grpc_interceptor().
    """
    if not isinstance(executor, concurrent.futures.ThreadPoolExecutor):
        raise TypeError("track() takes a concurrent.futures.ThreadPoolExecutor, got %s"
                        % type(executor).__name__)
    _add(executor)
    return executor


_track_all_installed = False


def track_all():
    """Tracks every ThreadPoolExecutor created from now on (what `run` does)."""
    global _track_all_installed
    with _lock:
        if _track_all_installed:
            return
        _track_all_installed = True
        original = concurrent.futures.ThreadPoolExecutor.__init__

        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            _add(self)

        concurrent.futures.ThreadPoolExecutor.__init__ = __init__


# --- the service's callbacks, bounded ------------------------------------------

# on_phase and cache_stats callbacks are the service's own code: each runs on
# a thread of its own and is waited for at most its deadline, so a callback
# that blocks cannot hold a Control call, its call slot or stop(). One left
# running past its deadline is abandoned; at most _MAX_ABANDONED at once
# (later calls are refused until one returns).
_MAX_ABANDONED = 4
_callbacks_lock = threading.Lock()
_abandoned = 0
_waiting = set()  # each waiting call's wake-up event; stop() sets them


def _bounded(what, fn, args, timeout):
    """fn(*args) within timeout seconds, or TimeoutError; fn's own error re-raised."""
    global _abandoned
    box = {}
    done = threading.Event()

    def run():
        global _abandoned
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting call
            box["error"] = e
        finally:
            with _callbacks_lock:
                done.set()
                if box.get("abandoned"):
                    _abandoned -= 1
                wake.set()

    wake = threading.Event()
    with _callbacks_lock:
        if _abandoned >= _MAX_ABANDONED:
            raise TimeoutError("%s not run: %d earlier callbacks are still running past their "
                               "deadlines" % (what, _abandoned))
        _waiting.add(wake)
    try:
        try:
            threading.Thread(target=run, name="rsslab-callback", daemon=True).start()
        except RuntimeError:  # interpreter shutting down: no new thread
            run()
        wake.wait(timeout)
    finally:
        with _callbacks_lock:
            _waiting.discard(wake)
            late = not done.is_set()
            if late:
                box["abandoned"] = True
                _abandoned += 1
    if late:
        raise TimeoutError("%s did not return within %.1f s; it goes on running, abandoned"
                           % (what, timeout))
    if "error" in box:
        raise box["error"]
    return box["value"]


def _abandon_waits():
    """stop(): every call waiting for a callback returns at once."""
    with _callbacks_lock:
        for wake in _waiting:
            wake.set()


# --- allocator, snapshot, release -----------------------------------------

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
            cache = dict(_bounded("the cache_stats callback", fn, (), _CACHE_STATS_TIMEOUT_S))
        except Exception as e:  # noqa: BLE001 - a snapshot never fails for it
            print("rsslab: cache_stats callback: %s" % _native.echo(repr(e), 256),
                  file=sys.stderr)
    threads = sum(getattr(ex, "_max_workers", 0) for ex in list(_executors))
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
        "workers": {"configured": threads, "alive": len(_target_tids())},
        "threads": threads,
        "control_address": _control_address,
    }


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


# --- automatic trim --------------------------------------------------------

def _auto_trim_number(keyword, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError("auto_trim(%s=) must be a number, got %s" % (keyword, type(value).__name__))
    try:
        value = float(value)
    except OverflowError:
        value = math.inf  # refused below, as out of range
    _native.check_auto_trim(keyword, value)  # ValueError naming auto_trim(keyword=)
    return value


def auto_trim(mode="after_burst", *, signal="auto", gap_mb=16, settle_s=2.0,
              settle_fraction=0.1, interval_s=60.0, min_spacing_s=10.0, tick_s=0.2):
    """Runs the server's automatic trim policy on a native thread (no GIL).

    mode: "after_burst" (once load has dropped for settle_s, if RSS exceeds
    the live estimate by gap_mb), "interval" (every interval_s), or None /
    "off" to stop. signal: "requests" (counted by grpc_interceptor() or
    count_request()), "cpu" (process CPU time), or "auto" (CPU time until
    the first request is counted). Never two trims within min_spacing_s.
    """
    if mode is None or mode == "off":
        _native.stop_auto_trim()
        return None
    # Modes and ranges: the one table in common/auto_trim_table.h, the
    # server's --auto_trim* flags' too.
    _native.check_auto_trim_mode(mode if isinstance(mode, str) else repr(mode),
                                 "auto_trim(mode=)")
    if signal not in ("auto", "requests", "cpu"):
        raise ValueError("auto_trim(signal=) must be auto, requests or cpu; got %r" % (signal,))
    gap_mb = _auto_trim_number("gap_mb", gap_mb)
    settle_s = _auto_trim_number("settle_s", settle_s)
    settle_fraction = _auto_trim_number("settle_fraction", settle_fraction)
    interval_s = _auto_trim_number("interval_s", interval_s)
    min_spacing_s = _auto_trim_number("min_spacing_s", min_spacing_s)
    tick_s = _auto_trim_number("tick_s", tick_s)
    _native.start_auto_trim(mode, signal, gap_mb, settle_s, settle_fraction, interval_s,
                            min_spacing_s, tick_s)
    return _native.auto_trim_state()


def count_request(n=1):
    """Counts n served requests for auto_trim's load signal."""
    _native.count_request(_check_int("count_request(n)", n, 1, 1 << 40))


def grpc_interceptor(aio=False):
    """A grpcio server interceptor: counts requests for auto_trim and runs a
    pending per-thread release on the worker right after its request.

    aio=True: one for grpc.aio.server() (counted and timed the same way).
    """
    if not isinstance(aio, bool):
        raise TypeError("grpc_interceptor(aio=) takes a boolean")
    _require_grpc("rsslab.grpc_interceptor()")
    from . import _grpc  # grpc is imported only when asked for
    return _grpc.AioInterceptor() if aio else _grpc.Interceptor()


def _require_grpc(what):
    """One line naming the package to install when grpcio is missing."""
    try:
        import grpc  # noqa: F401
    except ImportError as e:
        raise ImportError("%s needs grpcio, which this Python cannot import (%s): install "
                          "python3-grpcio (Debian; a venv then needs --system-site-packages) "
                          "or grpcio (pip)" % (what, e)) from None


# --- phases, cache, Control service ----------------------------------------

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
        _bounded("the on_phase callback for '%s'" % name, fn, (None if limit < 0 else limit,),
                 2.0 if timeout is None else timeout)
    elif name != "trim":
        # A service with no cache: the phase still labels the loadgen's
        # records, and the answer says nothing ran (trim releases anyway).
        note = ("no callback for phase '%s': this service registered %s "
                "(rsslab.on_phase(name, fn)); the phase only labels the records"
                % (name, ", ".join(registered) if registered else "none"))
    previous, _phase = _phase, name
    return previous, note


def control_address():
    """The Control service's host:port ("" when not serving: before serve(), after stop())."""
    return _control_address


def metrics_address():
    """Where GET /metrics is served ("" unless serve(metrics=...) ran, or after stop())."""
    return _metrics_address


def serve(control="127.0.0.1:0", metrics=None, token_file=None, transport="auto", server=None,
          name=None):
    """Starts the Control service in this process; returns its host:port.

    metrics="127.0.0.1:0" also serves GET /metrics (rsslab_server's metric
    names where they apply; metrics_address() tells the bound port).
    token_file: callers must send its token (rsslab_ctl --auth_token_file).
    transport: "grpcio" serves with the process's own grpcio (no second gRPC
    core: a few MiB less), "native" with the package's gRPC C++ (answers
    snapshots even while a handler holds the GIL), "auto" (default) grpcio
    if the process has imported it already, else native.
    server: the service's own grpc.Server, to serve Control on it (its port,
    its workers) instead of on a server of the package's: a second
    grpc.server in the process slows every request of the first. Call it
    after add_insecure_port and before server.start(); control= may name
    where that server listens ("HOST:PORT"), else its port is the one TCP
    port the process listens on. A token is needed when any address that
    server listens on is beyond loopback.
    name: the service this process is a worker of, written with its address
    so that `rsslab_ctl --control=all:NAME` reaches every worker; default
    $RSSLAB_SERVICE, else the program's name (the script without .py, the
    package of `python3 -m PKG`, "python" for -c).
    """
    from . import _serve
    return _serve.serve(control, metrics, token_file, transport, server, name)


def control_transport():
    """The transport serve() chose: "grpcio", "native" ("" if not serving)."""
    from . import _serve
    return _serve.transport()


# --- shutdown --------------------------------------------------------------

def stop():
    """Stops the Control service, /metrics and the automatic trim.

    Idempotent; serve() may start them again. Calls in flight get at most a
    second; callbacks still running are abandoned, not waited for.
    """
    global _control_address, _metrics_address
    _abandon_waits()
    from . import _serve
    _serve.stop()
    _control_address = _metrics_address = ""
    _native.stop_auto_trim()


def _at_exit():
    global _stopped
    if _stopped:
        return
    _stopped = True
    try:
        stop()
    finally:
        _native.shutdown()


def _after_fork_in_child():
    # The parent's Control service, address file, threads and locks stay
    # the parent's (the native side forgets its own in pthread_atfork
    # handlers): this process starts with none and may serve() its own.
    # Registrations the service made (on_phase, cache_stats, tracked
    # executors) are its code's, and stay.
    global _lock, _owed_lock, _callbacks_lock, _abandoned, _waiting
    global _control_address, _metrics_address
    _lock, _owed_lock, _callbacks_lock = threading.Lock(), threading.Lock(), threading.Lock()
    _abandoned, _waiting = 0, set()
    _control_address = _metrics_address = ""
    from . import _serve
    _serve.after_fork_in_child()


_native.set_thread_hooks(_target_tids, _submit_visits)
_native.set_snapshot_hook(_snapshot_part)
_native.set_phase_hook(_set_phase)
atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
