"""seed_reference: the seed 000 workload written as plainly as its report
reads, as the yardstick for web_worker.py's per-request cost
(bench/seed_overhead.sh runs it in the handler-alone loop only).

Per request: a random body of lognormal size (median 4 KiB, sigma 1.5, so a
12.6 KiB mean; capped at 1 MiB) from one module-level generator, a flat
200-item dict of ints round-tripped through json, and the body stored in
the cache with probability 0.3. No knobs, no per-request seeding: what a
team reproducing the seed without rsslab's reproducibility would write.
"""

import json
import math
import random

_RNG = random.Random(0)
_MU = math.log(4096)


def handle(request, cache):
    size = int(min(1 << 20, max(1.0, _RNG.lognormvariate(_MU, 1.5))))
    body = _RNG.randbytes(size)
    doc = {"k%d" % i: i for i in range(200)}
    doc = json.loads(json.dumps(doc))
    stored = False
    if _RNG.random() < 0.3:
        stored = cache.put("body:%d" % request["seed"], body)
    return {"body": body, "body_size": size, "stored": stored}
