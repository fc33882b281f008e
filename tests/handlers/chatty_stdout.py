"""Writes a line to stdout on every request and flushes it.

For agent_test: a server the agent launched must keep serving after the
agent is killed, even though the handler writes to stdout (through a pipe to
a dead agent that would be SIGPIPE or BrokenPipeError).
"""
import sys


def handle(request, cache):
    print("chatty_stdout: request", request.get("id") if isinstance(request, dict) else "")
    sys.stdout.flush()
    return None
