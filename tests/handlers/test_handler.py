"""Test handler: behaviour chosen per request through params.

  raise=1        raise ValueError("boom from test handler")
  sleep_ms=N     sleep N ms (releases the GIL) before answering
  store=N        put an N-byte body in the cache under key "k<seed>"
  print=1        print a line (stdout must not break the server)
"""

import time


def handle(request, cache):
    p = request["params"]
    if p.get("raise") == "1":
        raise ValueError("boom from test handler")
    if "sleep_ms" in p:
        time.sleep(int(p["sleep_ms"]) / 1000.0)
    if p.get("print") == "1":
        print("hello from the handler", flush=True)
    if "store" in p:
        body = b"x" * int(p["store"])
        stored = cache.put("k%d" % request["seed"], body)
        return {"body": body, "stored": stored}
    return {"body_size": 0, "worker_seen": request["worker"]}
