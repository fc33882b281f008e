"""web_worker: the seed 000 workload (the default handler).

What it reproduces: a threaded web worker whose response bodies partly land
in a shared cache. Per request it
  1. makes a random body of lognormal size (median 4 KiB, sigma 1.5, capped
     at 1 MiB), reproducible from the request's seed;
  2. round-trips a 200-item dict through json;
  3. with probability 0.3 stores the body in the shared LRU cache.

The dict's shape (knob dict_shape):
  flat    (default) item i is an int (even i) or a short string "v<i>" (odd
          i): the plainest reading of the seed's "200-item dict", and what
          a Python reproduction of the seed round-trips.
  nested  item i is [i, rng.random(), "v<i>"]: three values per item, one a
          float, which json prints and parses at several times the cost of
          an int or a short string. The default until flat replaced it; kept
          so older results can be reproduced exactly (same random stream, so
          the same bodies are stored).
docs/HANDLERS.md gives what each costs per request.

Bodies over 512 bytes are allocated by CPython through the C allocator, so
they land where a real service's would: in glibc's arenas (or the preloaded
allocator's). Which snapshot figures show the effect: status.rss_bytes after
fill vs after shrink/idle/trim, memory_map.arena_count/arena_rss_bytes, and
cache.cache_bytes (the live data).

Why sigma 1.5: seed 000 gives only the median (~4 KB) and the cap (1 MB).
sigma = 1.5 makes the mean about 12.6 KiB and the p99 about 130 KiB, so a
fill phase of 96,000 requests stores ~28,800 bodies (~350 MiB) and churns the
100 MiB cache several times over, and ~1 % of bodies cross glibc's default
128 KiB mmap threshold, as large responses in a real service do.

Knobs (server --handler_params=k=v,... or per-request params, strings):
  median      median body size in bytes           (4096)
  sigma       lognormal sigma                      (1.5)
  cap         maximum body size in bytes           (1048576)
  store_p     probability of storing the body      (0.3)
  dict_items  items in the json round-trip dict    (200)
  dict_shape  flat | nested (see above)             (flat)
  return_doc  1: also return the round-tripped dict  (0)
              as json in result["doc"] (tests check
              the shape with it)

KNOBS bounds each knob; the server refuses a request outside them with
INVALID_ARGUMENT before handle() runs, so one request allocates at most about
2 x cap (the body, and its copy in the response) + what dict_items items cost
twice (the dict and its json round-trip): at the bounds below about 30 MiB
(docs/RELIABILITY.md gives the measured figure).
"""

import json
import math
import random

from _knob import knob

DEFAULTS = {
    "median": 4096.0,
    "sigma": 1.5,
    "cap": 1048576,
    "store_p": 0.3,
    "dict_items": 200,
    "dict_shape": "flat",
    "return_doc": 0,
}
SHAPES = ("flat", "nested")

# (lo, hi) for each knob: ints when both bounds are ints. Every DEFAULTS key
# must have one (the server refuses to start otherwise).
KNOBS = {
    "median": (1.0, 8388608.0),
    "sigma": (0.0, 4.0),
    "cap": (1, 8388608),
    "store_p": (0.0, 1.0),
    "dict_items": (0, 20000),
    # Flat scalars (seed 000's dict) or the nested lists of earlier runs.
    "dict_shape": SHAPES,
    "return_doc": (0, 1),
}


def _knob(params, name):
    return knob(params, name, DEFAULTS)


def handle(request, cache):
    params = request["params"]
    rng = random.Random(request["seed"])
    median = _knob(params, "median")
    sigma = _knob(params, "sigma")
    cap = int(_knob(params, "cap"))
    store_p = _knob(params, "store_p")
    items = int(_knob(params, "dict_items"))
    shape = _knob(params, "dict_shape")
    if shape not in SHAPES:
        raise ValueError("dict_shape must be flat or nested, got %r" % shape)

    size = int(min(cap, max(1.0, rng.lognormvariate(math.log(median), sigma))))
    body = rng.randbytes(size)

    if shape == "flat":
        doc = {"k%d" % i: ("v%d" % i if i & 1 else i) for i in range(items)}
    else:
        doc = {"k%d" % i: [i, rng.random(), "v%d" % i] for i in range(items)}
    doc = json.loads(json.dumps(doc))
    if len(doc) != items:
        raise ValueError("json round-trip lost items")

    stored = False
    if rng.random() < store_p:
        stored = cache.put("body:%d" % request["seed"], body)
    out = {"body": body, "body_size": size, "stored": stored}
    if _knob(params, "return_doc"):
        out["doc"] = json.dumps(doc)
    return out
