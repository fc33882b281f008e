"""Records the order in which requests reach the handler.

Each call takes the next number of a counter as its position, appends the
request's id to a list, spins `spin` iterations of pure Python (holding
the GIL, 2000 by default) and returns that position as result["position"].

The position is one builtin call (next() on an itertools.count), taken
whole under the GIL: the interpreter may hand the GIL to another thread
after any call returns, so a `len(order)` read before an `order.append`
could give two requests the same position (it did under ASan on a loaded
machine, docs/TESTING.md#sanitizers).
"""

import itertools

order = []
_next_position = itertools.count()


def handle(request, cache):
    position = next(_next_position)
    order.append(request["id"])
    x = 0
    for i in range(int(request["params"].get("spin", "2000"))):
        x += i
    return {"body_size": 0, "position": position}
