"""The service's callbacks (on_phase, cache_stats) run with a deadline."""

import threading

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


def _after_fork_in_child():
    global _callbacks_lock, _abandoned, _waiting
    _callbacks_lock, _abandoned, _waiting = threading.Lock(), 0, set()
