"""The Control service over the service's own grpcio (serve(transport="grpcio")).

A process that already runs Debian's python3-grpcio carries a gRPC core of
its own; serving Control with it costs a few hundred KiB where a second,
C++ gRPC core costs several MiB (docs/PACKAGE.md, "Idle overhead"). Only
the sockets and streams are here: the token check, the request's parse,
every rule and every answer are the native ControlCalls (control/service/
control_calls.h), the same code rsslab_server answers with. A handler
holds the GIL only to pass bytes in and out; the native call releases it.

Two ways to listen: bind() starts a grpc.server of the package's own on
its own port; attach() adds the Control handlers to the service's own
server (serve(server=)), so no second server polls beside it (a second
grpc.server in a process costs every request of the first: docs/PACKAGE.md,
"What the package costs a busy service").

Bounds, the native transport's (_rsslab.control_limits()): a request of at
most 64 KiB (grpcio reads a message before the handler runs, so this bounds
what an unauthorized client can send; on a shared server the service's own
limit applies to the read and this one to what is answered), 8 watch
streams and 12 calls in all at once; more are refused at once
(RESOURCE_EXHAUSTED). rsslab/_serve.py opens and closes the native side;
this file only listens.
"""

import concurrent.futures
import signal
import threading

import grpc

from . import _rsslab as _native

_SERVICE = "rsslab.v1.Control"
_LIMITS = _native.control_limits()
_CODES = {c.value[0]: c for c in grpc.StatusCode}

_server = None
# serve(server=): the service's servers the handlers were added to. grpcio
# cannot remove them: a server is attached once, and while the Control
# service is stopped its calls get the native side's UNAVAILABLE.
_attached = []
_calls_lock = threading.Lock()
_calls = 0


def _enter(context, request_bytes):
    """The bounds, checked in the handler too: on the service's own server
    (serve(server=)) no grpc.server option of the package's applies."""
    global _calls
    if request_bytes > _LIMITS["max_request_bytes"]:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                      "Control request of %d bytes, more than %d"
                      % (request_bytes, _LIMITS["max_request_bytes"]))
    with _calls_lock:
        full = _calls >= _LIMITS["max_calls"]
        if not full:
            _calls += 1
    if full:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                      "more than %d Control calls at once" % _LIMITS["max_calls"])


def _leave():
    global _calls
    with _calls_lock:
        _calls -= 1


def _authorization(context):
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return value if isinstance(value, str) else None
    return None


def _abort(context, code, message):
    context.abort(_CODES.get(code, grpc.StatusCode.UNKNOWN), message)


def _unary(method):
    def handler(request, context):
        _enter(context, len(request))
        try:
            left = context.time_remaining()
            code, message, answer = _native.control_call(
                method, request, _authorization(context),
                -1.0 if left is None else max(left, 0.0))
        finally:
            _leave()
        if code:
            _abort(context, code, message)
        return answer
    return grpc.unary_unary_rpc_method_handler(handler)


def _watch(request, context):
    _enter(context, len(request))
    try:
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
    finally:
        _leave()


def _handler():
    return grpc.method_handlers_generic_handler(_SERVICE, {
        "SetPhase": _unary("SetPhase"),
        "GetSnapshot": _unary("GetSnapshot"),
        "Trim": _unary("Trim"),
        "WatchSnapshots": grpc.unary_stream_rpc_method_handler(_watch),
    })


def _at_interpreter_exit():
    # At interpreter shutdown Python joins executor threads (ours serve the
    # watch streams) and from then on refuses them new work, before atexit
    # runs rsslab.stop(): a stream left open would hold the exit, and a
    # call arriving in between raised in grpcio's thread ("cannot schedule
    # new futures after shutdown"). So the streams end and bind()'s server
    # stops here; an attached server is the service's own.
    if _server is not None or _attached:
        _native.end_control_watches()
    stop()


# Runs before concurrent.futures' own join (registered later: called first).
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_at_interpreter_exit)

# Process-directed signals that grpcio's serving threads must leave to the
# service's own: a handler that ends the process from one of them (uWSGI's
# die-on-term calls exit() from its SIGTERM handler) would finalize the
# interpreter there. The faults stay unblocked.
_ASYNC_SIGNALS = set(signal.valid_signals()) - {
    signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGTRAP,
    signal.SIGABRT, signal.SIGSYS, signal.SIGKILL, signal.SIGSTOP}


def bind(address):
    """Listens on address with the process's grpcio; returns the port (0: cannot)."""
    global _server
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(max_workers=_LIMITS["max_calls"],
                                              thread_name_prefix="rsslab-control"),
        handlers=[_handler()],
        options=[("grpc.max_receive_message_length", _LIMITS["max_request_bytes"]),
                 # grpcio's default would let a second server share the port.
                 ("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=_LIMITS["max_calls"])
    try:
        port = server.add_insecure_port(address)
    except RuntimeError:  # grpcio raises where older versions returned 0
        return 0
    if port:
        # The threads start() starts, and the workers they start, inherit
        # this thread's signal mask.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _ASYNC_SIGNALS)
        try:
            server.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        _server = server
    return port


def attach(server):
    """Adds the Control handlers to the service's own grpc.server (once)."""
    if not any(s is server for s in _attached):
        server.add_generic_rpc_handlers((_handler(),))
        _attached.append(server)


def after_fork_in_child():
    # The server and its threads are the parent's: forgotten, never stopped
    # here (a stop would end the parent's calls on the shared socket).
    global _server, _attached, _calls_lock, _calls
    _server, _attached, _calls_lock, _calls = None, [], threading.Lock(), 0


def stop():
    """Stops the server (calls in flight get a second)."""
    global _server
    server, _server = _server, None
    if server is not None:
        server.stop(1.0).wait(2.0)
