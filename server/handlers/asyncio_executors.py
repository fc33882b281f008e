"""asyncio_executors: seed 002, part 1: nested event loops leaking threads.

What it reproduces: a service that runs async code from worker threads by
nesting event loops. Per request (fix=0, the report's pattern):
  L1  handle() calls asyncio.run(handler) on the server's worker thread (the
      report's consumer dispatching an async handler from a thread);
  L2  the handler awaits asyncio.to_thread(download); download runs its own
      event loop the way the report's noaa.py did: new_event_loop(),
      run_until_complete(), close(); inside, `fanout` asyncio.to_thread
      fetches run on that loop's fresh default executor (up to
      min(32, cpu+4) new threads), then `fire` cleanups are fired and
      forgotten: asyncio.create_task(asyncio.to_thread(cleanup)).
Each loop gets a fresh default executor, so every request starts new OS
threads. The fired cleanups take `linger_ms` (the report's S3 calls took
seconds) and outlive their loop: loop.close() shuts its executor down with
wait=False, so the request returns while the cleanup threads still run, and
the next requests pile theirs on top. glibc gives each new thread an arena
(up to 8 x cores), and arenas are never destroyed: the arena count stays up
after the threads are gone.

On CPython 3.11 asyncio.run() itself does join its default executor
(shutdown_default_executor waits without a timeout; 3.12 gives up after
300 s), so an L1 built with asyncio.run blocks until its own fired work is
done; the leak comes from the loop that is closed without that join (L2),
exactly as in the report's hand-rolled loop code.

fix=1 applies the report's fixes: every loop is an asyncio.Runner with
loop.set_default_executor(ThreadPoolExecutor(max_workers=cap)), and the
cleanups are awaited (asyncio.gather) instead of fired. Threads then come
and go within the request (the request takes linger_ms longer) and the
thread count and arena count stay flat.

Executor threads name themselves (prctl PR_SET_NAME) aio-fetch and
aio-cleanup so the snapshot's thread census tells them apart; without that
they would carry their creator's name (rsslab-wN), as the report's 316
threads all said "python".

Which snapshot figures show it: status.threads and thread_names (aio-cleanup
count), memory_map.arena_count / arena_rss_bytes and
allocator_stats.glibc.malloc_info_arenas; stack_count.

Knobs (server --handler_params=k=v,... or per-request params, strings):
  fix        0: the report's pattern; 1: capped Runner + awaited cleanups (0)
  fanout     asyncio.to_thread fetches per request                    (4)
  fire       fire-and-forget cleanups per request                     (2)
  linger_ms  how long each cleanup takes                              (10000)
  work_ms    how long each fetch takes                                (5)
  alloc_kb   KiB each fetch/cleanup allocates (16 KiB pieces)         (256)
  cap        max_workers of the capped executor (fix=1)               (4)
"""

import asyncio
import ctypes
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from _knob import knob

DEFAULTS = {
    "fix": 0,
    "fanout": 4,
    "fire": 2,
    "linger_ms": 10000,
    "work_ms": 5,
    "alloc_kb": 256,
    "cap": 4,
}

# With fix=0 a cleanup that finishes after its loop closed cannot report
# back ("Event loop is closed", "Task was destroyed but it is pending"):
# that is the bug being reproduced, not news; keep it off the server's
# stderr.
logging.getLogger("asyncio").setLevel(logging.CRITICAL)
logging.getLogger("concurrent.futures").setLevel(logging.CRITICAL)

_libc = ctypes.CDLL("libc.so.6")
_PR_SET_NAME = 15


def _knob(params, name):
    return knob(params, name, DEFAULTS)


def _name_thread(name):
    _libc.prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def _touch_memory(kb):
    # Pieces over 512 bytes go to the C allocator: this thread's arena.
    return [bytes([i & 255]) * 16384 for i in range(max(0, kb // 16))]


def _fetch(k):
    _name_thread("aio-fetch")
    held = _touch_memory(k["alloc_kb"])
    time.sleep(k["work_ms"] / 1000.0)
    return len(held)


def _cleanup(k):
    _name_thread("aio-cleanup")
    held = _touch_memory(k["alloc_kb"])
    del held
    time.sleep(k["linger_ms"] / 1000.0)
    return True


def _run_capped(coro, cap):
    """The report's run_capped(): asyncio.run() with a capped executor."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(
            ThreadPoolExecutor(max_workers=cap, thread_name_prefix="capped"))
        return runner.run(coro)


def _run_own_loop(coro):
    """The report's hand-rolled loop: closed without joining its executor."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()  # executor.shutdown(wait=False): running work lives on


async def _download_concurrent(k):
    parts = await asyncio.gather(
        *[asyncio.to_thread(_fetch, k) for _ in range(k["fanout"])])
    cleanups = [asyncio.to_thread(_cleanup, k) for _ in range(k["fire"])]
    if k["fix"]:
        await asyncio.gather(*cleanups, return_exceptions=True)
    else:
        for c in cleanups:
            asyncio.create_task(c)  # fire and forget
        await asyncio.sleep(0)      # let them start before returning
    return sum(parts)


def _download(k):
    if k["fix"]:
        return _run_capped(_download_concurrent(k), k["cap"])
    return _run_own_loop(_download_concurrent(k))


async def _handler(k):
    return await asyncio.to_thread(_download, k)


def handle(request, cache):
    params = request["params"]
    k = {name: _knob(params, name) for name in DEFAULTS}
    if k["fix"]:
        pieces = _run_capped(_handler(k), k["cap"])
    else:
        pieces = asyncio.run(_handler(k))
    return {
        "body_size": 0,
        "pieces": pieces,
        "python_threads": threading.active_count(),
    }
