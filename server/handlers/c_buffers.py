"""c_buffers: the seed 004 service: C-extension work on temporary buffers.

What it reproduces: a threaded service whose time goes into C extensions
that allocate and free many 1-64 KiB temporary buffers, with the GIL
released, so several worker threads are inside C code, and inside the C
allocator, at the same time. This is where seed 004 saw allocators differ
in throughput (jemalloc +18 %, tcmalloc +12 % QPS over glibc); pure-Python
work under the GIL showed no difference.

Per request it processes `events` events. For each event:
  1. a buffer of random size (uniform in [min_kb, max_kb] KiB, from the
     request's seed) is made (a bytes object: malloc, under the GIL);
  2. it is compressed and decompressed by libz's compress2()/uncompress(),
     called through ctypes, which releases the GIL for the whole call: zlib
     mallocs its working buffers (deflate: five chunks of ~6-64 KiB; inflate:
     ~7 KiB state + 32 KiB window) inside the call and frees them before it
     returns, so several workers really are inside malloc/free at once;
  3. hashlib.sha256() over the result (OpenSSL hashes with the GIL released
     for data over 2047 bytes).
Why ctypes and not the zlib module: CPython's zlib.compress() runs
deflate() without the GIL but calls deflateInit2()/deflateEnd() - where the
mallocs happen - with the GIL held, so with `via=zlib` the allocator calls
are serialised by the GIL and only the compression work overlaps. `via=zlib`
is kept for comparison.
Nothing is kept: every buffer is garbage when the request returns (the body
is a 32-byte digest), so RSS stays flat and the allocator's speed under
concurrency is what the throughput measures.

Which snapshot figures show it: the load generator's QPS and latency per
allocator profile (the headline figure), workers.busy (how many workers are
busy at once), allocator_stats (allocated vs resident: flat). The result
map carries t0_us / t1_us (CLOCK_MONOTONIC microseconds at handler start and
end) and c_us (time spent in the GIL-free C calls) and longest_c_t0_us /
longest_c_t1_us (the longest single C call), so a client can see another
worker run whole requests inside one call of this one.

Knobs (server --handler_params=k=v,... or per-request params, strings):
  events     events per request                        (32)
  min_kb     smallest event buffer, KiB                (1)
  max_kb     largest event buffer, KiB                 (64)
  level      zlib compression level                    (1)
  via        ctypes (libz, GIL released around malloc) or zlib
                                                       (ctypes)
  store_p    probability of caching the digest         (0)
"""

import ctypes
import hashlib
import random
import time
import zlib

from _knob import knob

DEFAULTS = {
    "events": 32,
    "min_kb": 1,
    "max_kb": 64,
    "level": 1,
    "via": "ctypes",
    "store_p": 0.0,
}

# libz through ctypes: a foreign call releases the GIL for its whole length.
_libz = ctypes.CDLL("libz.so.1")
_libz.compressBound.restype = ctypes.c_ulong
_libz.compressBound.argtypes = [ctypes.c_ulong]
_libz.compress2.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulong),
                            ctypes.c_char_p, ctypes.c_ulong, ctypes.c_int]
_libz.uncompress.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_ulong),
                             ctypes.c_char_p, ctypes.c_ulong]


def _knob(params, name):
    return knob(params, name, DEFAULTS)


def _now_us():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


def _roundtrip_ctypes(buf, level):
    n = len(buf)
    packed = ctypes.create_string_buffer(_libz.compressBound(n))
    packed_len = ctypes.c_ulong(len(packed))
    if _libz.compress2(packed, ctypes.byref(packed_len), buf, n, level) != 0:
        raise RuntimeError("compress2 failed")
    out = ctypes.create_string_buffer(n)
    out_len = ctypes.c_ulong(n)
    if _libz.uncompress(out, ctypes.byref(out_len), packed, packed_len.value) != 0:
        raise RuntimeError("uncompress failed")
    return out.raw[:out_len.value]


def _roundtrip_zlib(buf, level):
    return zlib.decompress(zlib.compress(buf, level))


def handle(request, cache):
    t0 = _now_us()
    params = request["params"]
    rng = random.Random(request["seed"])
    events = _knob(params, "events")
    lo = max(1, _knob(params, "min_kb")) * 1024
    hi = max(lo, _knob(params, "max_kb") * 1024)
    level = _knob(params, "level")
    via = _knob(params, "via")
    if via not in ("ctypes", "zlib"):
        raise ValueError("via must be ctypes or zlib, not %r" % via)
    roundtrip = _roundtrip_ctypes if via == "ctypes" else _roundtrip_zlib

    digest = hashlib.sha256()
    c_us = 0
    longest = (0, 0, 0)  # (duration, start, end) of the longest C call
    total = 0
    for _ in range(events):
        size = rng.randint(lo, hi)
        # Compressible but not trivial: a random 256-byte pattern repeated.
        buf = (rng.randbytes(256) * (size // 256 + 1))[:size]
        total += size

        start = _now_us()
        unpacked = roundtrip(buf, level)
        end = _now_us()
        c_us += end - start
        if end - start > longest[0]:
            longest = (end - start, start, end)
        if len(unpacked) != size:
            raise ValueError("zlib round-trip lost bytes")
        digest.update(hashlib.sha256(unpacked).digest())

    body = digest.digest()
    stored = False
    if rng.random() < _knob(params, "store_p"):
        stored = cache.put("digest:%d" % request["seed"], body)
    return {
        "body": body,
        "body_size": len(body),
        "stored": stored,
        "bytes_processed": total,
        "c_us": c_us,
        "longest_c_t0_us": longest[1],
        "longest_c_t1_us": longest[2],
        "t0_us": t0,
        "t1_us": _now_us(),
    }
