"""DEFAULTS names a knob KNOBS does not bound: the server refuses to start."""
DEFAULTS = {"n": 1, "size": 10}
KNOBS = {"n": (0, 10)}


def handle(request, cache):
    return None
