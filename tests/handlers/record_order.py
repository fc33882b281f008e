"""Records the order in which requests reach the handler.

Each call appends the request's id to a list, spins `spin` iterations of
pure Python (holding the GIL, 2000 by default) and returns its position in
that order as result["position"]. The list is touched only under the GIL,
so positions are exactly the order the handler ran the requests.
"""

order = []


def handle(request, cache):
    position = len(order)
    order.append(request["id"])
    x = 0
    for i in range(int(request["params"].get("spin", "2000"))):
        x += i
    return {"body_size": 0, "position": position}
