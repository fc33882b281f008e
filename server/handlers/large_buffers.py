"""large_buffers: seed 002, part 2: big buffers go back, small ones stay.

What it reproduces: a request that needs a few MB-sized buffers (a
downloaded file, a decoded grid) next to many small allocations (parsed
records), some of which outlive the request. glibc serves a request above
its mmap threshold (128 KiB at start) with its own mmap() and munmap()s it
on free(): that memory goes straight back to the OS. Small requests come
from the thread's arena (or the brk heap) and stay there when freed: the
peak drops after the request while arena memory stays.

glibc's mmap threshold is dynamic: when a chunk that was mmapped is freed,
the threshold rises to that chunk's size (and the trim threshold to twice
it), up to 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit). So the first
request's 4 MiB buffers are mmapped and returned on free, but from then on
4 MiB requests come from the arenas and stay resident there. Buffers over
32 MiB (big_mb=40) are always mmapped. Setting M_MMAP_THRESHOLD (e.g.
MALLOC_MMAP_THRESHOLD_=131072 in the environment the server starts with)
switches the dynamic behaviour off (mallopt(3); not measured here). Measured
numbers: docs/HANDLERS.md.

Per request:
  1. allocate `big_count` buffers of `big_mb` MiB and write every page;
  2. allocate `small_count` small buffers of 600..small_max bytes (over
     pymalloc's 512-byte limit, so they come from malloc);
  3. keep them all for `hold_ms` (so a snapshot taken meanwhile sees them);
  4. free the big ones and most small ones; with probability `keep_p` a
     small one is put in the shared cache (it outlives the request and pins
     its arena memory).

Which snapshot figures show it: allocator_stats.glibc.hblkhd / mmap_bytes
(bytes in mmapped chunks: up during the request, down after),
memory_map.other_anon_rss_bytes (where mmapped chunks live), glibc.arena /
memory_map.arena_rss_bytes and heap_rss_bytes (stay), status.rss_bytes and
hwm_bytes (peak vs now), cache.cache_bytes.

Knobs (server --handler_params=k=v,... or per-request params, strings):
  big_count    MB-sized buffers per request                    (2)
  big_mb       size of each, MiB                               (4)
  small_count  small buffers per request                       (2000)
  small_max    largest small buffer, bytes                     (4096)
  keep_p       probability a small buffer is cached            (0.05)
  hold_ms      how long the buffers are held                   (0)
"""

import random
import time

from _knob import knob

DEFAULTS = {
    "big_count": 2,
    "big_mb": 4.0,
    "small_count": 2000,
    "small_max": 4096,
    "keep_p": 0.05,
    "hold_ms": 0,
}


def _knob(params, name):
    return knob(params, name, DEFAULTS)


def handle(request, cache):
    params = request["params"]
    rng = random.Random(request["seed"])
    big_count = _knob(params, "big_count")
    big_bytes = int(_knob(params, "big_mb") * 1024 * 1024)
    small_count = _knob(params, "small_count")
    small_max = max(600, _knob(params, "small_max"))
    keep_p = _knob(params, "keep_p")
    hold_ms = _knob(params, "hold_ms")

    # bytes * n is malloc + memset: every page is written, so it is resident
    # (bytes(n) would be calloc, and untouched mmapped pages cost nothing).
    big = [bytes([(request["seed"] + i) & 255 or 1]) * big_bytes
           for i in range(big_count)]
    small = [rng.randbytes(rng.randint(600, small_max))
             for _ in range(small_count)]
    if hold_ms > 0:
        time.sleep(hold_ms / 1000.0)

    kept = 0
    for i, buf in enumerate(small):
        if rng.random() < keep_p:
            if cache.put("small:%d:%d" % (request["seed"], i), buf):
                kept += 1
    big_total = sum(len(b) for b in big)
    small_total = sum(len(s) for s in small)
    del big, small
    return {
        "body_size": big_total,
        "stored": kept > 0,
        "big_bytes": big_total,
        "small_bytes": small_total,
        "small_kept": kept,
    }
