"""Stalls once: the first request with params stall=1 sleeps 1 s. Run the
server with --threads=1 so every request queues behind the stall, as behind
a GC pause or a lock. Used by tests/loadgen_it to compare open and closed
loop latency (coordinated omission)."""

import threading
import time

_lock = threading.Lock()
_stalled = False


def handle(request, cache):
    global _stalled
    if request["params"].get("stall") == "1":
        with _lock:
            first = not _stalled
            _stalled = True
        if first:
            time.sleep(1.0)
    return {"body_size": 0}
