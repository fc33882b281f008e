"""The Control service over the service's own grpcio (serve(transport="grpcio")).

A process that already runs Debian's python3-grpcio carries a gRPC core of
its own; serving Control with it costs a few hundred KiB where a second,
C++ gRPC core costs several MiB (docs/PACKAGE.md, "Idle overhead"). Only
the sockets and streams are here: the token check, the request's parse,
every rule and every answer are the native ControlCalls (control/service/
control_calls.h), the same code rsslab_server answers with. A handler
holds the GIL only to pass bytes in and out; the native call releases it.

Bounds: a request of at most 64 KiB (Control's requests are a few dozen
bytes; grpcio reads a message before the handler runs, so this bounds what
an unauthorized client can send), 8 watch streams (the native rule) plus 4
unary calls at once; more are refused at once (RESOURCE_EXHAUSTED).
"""

import concurrent.futures
import threading

import grpc

from . import _rsslab as _native

_SERVICE = "rsslab.v1.Control"
_MAX_REQUEST_BYTES = 64 << 10
_MAX_WATCHES = 8
_MAX_UNARY = 4
_CODES = {c.value[0]: c for c in grpc.StatusCode}

_server = None


def _authorization(context):
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value if isinstance(value, str) else None
    return None


def _abort(context, code, message):
    context.abort(_CODES.get(code, grpc.StatusCode.UNKNOWN), message)


def _unary(method):
    def handler(request, context):
        left = context.time_remaining()
        code, message, answer = _native.control_call(
            method, request, _authorization(context), -1.0 if left is None else max(left, 0.0))
        if code:
            _abort(context, code, message)
        return answer
    return grpc.unary_unary_rpc_method_handler(handler)


def _watch(request, context):
    code, message, stream = _native.control_watch(request, _authorization(context))
    if code:
        _abort(context, code, message)
    # A client that goes away ends the wait at once, not at the next tick.
    context.add_callback(stream.cancel)
    try:
        while True:
            snapshot = stream.next()  # GIL released while it waits
            if snapshot is None:
                return
            yield snapshot
    finally:
        stream.close()


def _end_watches():
    # Python joins executor threads (ours serve the watch streams) before
    # atexit runs rsslab.stop(); a stream left open would hold the exit.
    if _server is not None:
        _native.end_control_watches()


# Runs before concurrent.futures' own join (registered later: called first).
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_end_watches)


def start(address, token_file):
    """Listens on address with the process's grpcio; returns host:port."""
    global _server
    _native.open_control_calls(address, token_file)  # ValueError: address, token, listen rule
    try:
        server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(
                max_workers=_MAX_WATCHES + _MAX_UNARY, thread_name_prefix="rsslab-control"),
            handlers=[grpc.method_handlers_generic_handler(_SERVICE, {
                "SetPhase": _unary("SetPhase"),
                "GetSnapshot": _unary("GetSnapshot"),
                "Trim": _unary("Trim"),
                "WatchSnapshots": grpc.unary_stream_rpc_method_handler(_watch),
            })],
            options=[("grpc.max_receive_message_length", _MAX_REQUEST_BYTES),
                     # grpcio's default would let a second server share the port.
                     ("grpc.so_reuseport", 0)],
            maximum_concurrent_rpcs=_MAX_WATCHES + _MAX_UNARY)
        try:
            port = server.add_insecure_port(address)
        except RuntimeError:  # grpcio raises where older versions returned 0
            port = 0
        if not port:
            raise ValueError("cannot listen on %s (in use, or not an address of this host)"
                             % address)
        server.start()
    except BaseException:
        _native.stop_serving()
        raise
    _server = server
    return _native.control_calls_bound(port)


def stop():
    """Ends the watch streams, then the server (calls in flight get a second)."""
    global _server
    server, _server = _server, None
    _native.stop_serving()
    if server is not None:
        server.stop(1.0).wait(2.0)
