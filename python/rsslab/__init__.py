"""rsslab inside a Python service: where resident memory is, and giving it back.

Five lines for a grpcio service (docs/PACKAGE.md):

    import rsslab
    rsslab.cap_arenas(2)                       # at import, before threads exist
    pool = rsslab.track(futures.ThreadPoolExecutor(max_workers=16))
    server = grpc.server(pool, interceptors=[rsslab.grpc_interceptor()])
    rsslab.auto_trim("after_burst"); rsslab.serve("127.0.0.1:0")

The figures and releases come from the same C++ libraries as rsslab_server
(memory/alloc, memory/trim, memory/snapshot, common/procfs) through the
native module rsslab._native. This file is the public API; each job is a
module of its own:

    _threads.py    track(), track_all(): the executors a release reaches
    _memory.py     allocator(), snapshot(), release(), cap_arenas()
    _auto_trim.py  auto_trim(), count_request()
    _phases.py     on_phase(), cache_stats(), and SetPhase and a snapshot's
                   Python part for the native Control service
    _callbacks.py  the service's callbacks run with a deadline
    _serve.py      serve(), stop(): the Control service and its address file
    _checks.py     argument checks
"""

import atexit
import os

from . import _callbacks, _phases, _serve, _threads
from . import _rsslab as _native
from ._auto_trim import auto_trim, count_request
from ._memory import ArenaCapError, allocator, cap_arenas, release, snapshot
from ._phases import cache_stats, on_phase
from ._threads import _marked, track, track_all  # noqa: F401 (_marked: bench/package_per_call.py)

_stopped = False

__version__ = "0.1.0"

__all__ = [
    "ArenaCapError", "allocator", "snapshot", "release", "track", "track_all",
    "cap_arenas", "auto_trim", "count_request", "grpc_interceptor", "serve", "control_transport",
    "on_phase", "cache_stats", "control_address", "metrics_address", "stop",
]


def grpc_interceptor(aio=False):
    """A grpcio server interceptor: counts requests for auto_trim and runs a
    pending per-thread release on the worker right after its request.

    aio=True: one for grpc.aio.server() (counted and timed the same way).
    """
    if not isinstance(aio, bool):
        raise TypeError("grpc_interceptor(aio=) takes a boolean")
    _require_grpc("rsslab.grpc_interceptor()")
    from . import _grpc  # grpc is imported only when asked for
    return _grpc.AioInterceptor() if aio else _grpc.Interceptor()


def _require_grpc(what):
    """One line naming the package to install when grpcio is missing."""
    try:
        import grpc  # noqa: F401
    except ImportError as e:
        raise ImportError("%s needs grpcio, which this Python cannot import (%s): install "
                          "python3-grpcio (Debian; a venv then needs --system-site-packages) "
                          "or grpcio (pip)" % (what, e)) from None


# --- Control service ---------------------------------------------------------

def control_address():
    """The Control service's host:port ("" when not serving: before serve(), after stop())."""
    return _serve.control_address()


def metrics_address():
    """Where GET /metrics is served ("" unless serve(metrics=...) ran, or after stop())."""
    return _serve.metrics_address()


def serve(control="127.0.0.1:0", metrics=None, token_file=None, transport="auto", server=None,
          name=None):
    """Starts the Control service in this process; returns its host:port.

    metrics="127.0.0.1:0" also serves GET /metrics (rsslab_server's metric
    names where they apply; metrics_address() tells the bound port).
    token_file: callers must send its token (rsslab_ctl --auth_token_file).
    transport: "grpcio" serves with the process's own grpcio (no second gRPC
    core: a few MiB less), "native" with the package's gRPC C++ (answers
    snapshots even while a handler holds the GIL), "auto" (default) grpcio
    if the process has imported it already, else native.
    server: the service's own grpc.Server, to serve Control on it (its port,
    its workers) instead of on a server of the package's: a second
    grpc.server in the process slows every request of the first. Call it
    after add_insecure_port and before server.start(); control= may name
    where that server listens ("HOST:PORT"), else its port is the one TCP
    port the process listens on. A token is needed when any address that
    server listens on is beyond loopback.
    name: the service this process is a worker of, written with its address
    so that `rsslab_ctl --control=all:NAME` reaches every worker; default
    $RSSLAB_SERVICE, else the program's name (the script without .py, the
    package of `python3 -m PKG`, "python" for -c).
    """
    return _serve.serve(control, metrics, token_file, transport, server, name)


def control_transport():
    """The transport serve() chose: "grpcio", "native" ("" if not serving)."""
    return _serve.transport()


# --- shutdown --------------------------------------------------------------

def stop():
    """Stops the Control service, /metrics and the automatic trim.

    Idempotent; serve() may start them again. Calls in flight get at most a
    second; callbacks still running are abandoned, not waited for.
    """
    _callbacks._abandon_waits()
    _serve.stop()
    _native.stop_auto_trim()


def _at_exit():
    global _stopped
    if _stopped:
        return
    _stopped = True
    try:
        stop()
    finally:
        _native.shutdown()


def _after_fork_in_child():
    # The parent's Control service, address file, threads and locks stay
    # the parent's (the native side forgets its own in pthread_atfork
    # handlers): this process starts with none and may serve() its own.
    # Registrations the service made (on_phase, cache_stats, tracked
    # executors) are its code's, and stay.
    _threads._after_fork_in_child()
    _callbacks._after_fork_in_child()
    _phases._after_fork_in_child()
    _serve.after_fork_in_child()


_native.set_thread_hooks(_threads._target_tids, _threads._submit_visits)
_native.set_snapshot_hook(_phases._snapshot_part)
_native.set_phase_hook(_phases._set_phase)
atexit.register(_at_exit)
os.register_at_fork(after_in_child=_after_fork_in_child)
