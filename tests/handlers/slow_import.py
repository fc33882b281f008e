"""Takes 60 s to import: a server that stays not-ready for a long time.

For agent_test: an agent killed during such a launch leaves a half-launched
server that the next agent must find and stop.
"""
import time

time.sleep(60)


def handle(request, cache):
    return None
