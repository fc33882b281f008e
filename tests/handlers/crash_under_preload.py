"""Crashes the server mid-run when an allocator is preloaded: the first
request in a process started with LD_PRELOAD ends it with os._exit(3).
Under the glibc profile (no preload) it serves like a small web worker.
Used by tests/sweep_test.cc so one profile's cells crash while the others
run on."""

import os

_PRELOADED = bool(os.environ.get("LD_PRELOAD"))


def handle(request, cache):
    if _PRELOADED:
        os._exit(3)
    body = b"x" * 4096
    if request["seed"] % 3 == 0:
        cache.put("k%d" % request["seed"], body)
    return {"body_size": len(body)}
