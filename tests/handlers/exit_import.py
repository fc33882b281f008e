"""Calls sys.exit(0) while importing: the server must fail to start with a
message (not exit 0 silently)."""
import sys

sys.exit(0)


def handle(request, cache):
    return None
