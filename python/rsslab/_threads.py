"""rsslab.track() and track_all(): the executors whose worker threads a
release reaches, and the visit tasks that run each worker's part of it on
that worker (the native side calls _target_tids and _submit_visits)."""

import concurrent.futures
import threading
import weakref
from concurrent.futures import thread as _cf_thread

from . import _rsslab as _native

_owed_lock = threading.Lock()  # the idle counts _submit_one owed a pool
_executors = weakref.WeakSet()


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
_install_lock = threading.Lock()


def track_all():
    """Tracks every ThreadPoolExecutor created from now on (what `run` does)."""
    global _track_all_installed
    with _install_lock:
        if _track_all_installed:
            return
        _track_all_installed = True
        original = concurrent.futures.ThreadPoolExecutor.__init__

        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            _add(self)

        concurrent.futures.ThreadPoolExecutor.__init__ = __init__


def _worker_counts():
    """(threads configured, threads alive) over the tracked executors."""
    configured = sum(getattr(ex, "_max_workers", 0) for ex in list(_executors))
    return configured, len(_target_tids())


def _after_fork_in_child():
    global _owed_lock, _install_lock
    _owed_lock, _install_lock = threading.Lock(), threading.Lock()
