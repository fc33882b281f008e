"""noop: answers at once, allocating nothing on purpose.

What it reproduces: nothing. It measures the server and the load generator
themselves (gRPC, the worker hand-off, taking the GIL), so a sweep can
subtract their cost, and their memory, from a real handler's.

Which snapshot figures show it: requests_served rises; status.rss_bytes and
memory_map stay at the idle server's level.

Knobs: none. Request params are ignored.
"""


def handle(request, cache):
    return {"body_size": 0}
