"""rsslab.grpc_interceptor(): counts and times requests (the /metrics
rsslab_handler_latency_seconds histogram) and runs a pending per-thread
release on the worker that just served one (grpcio server interceptor)."""

import time

import grpc

from . import _rsslab as _native

_clock = time.perf_counter


def _unary(behavior):
    def wrapped(request_or_iterator, context):
        t0 = _clock()
        error = True
        try:
            r = behavior(request_or_iterator, context)
            error = False
            return r
        finally:
            # Counted, timed, then this worker's share of a pending release
            # (one atomic load when none is), before it takes the next call.
            _native.after_request(_clock() - t0, error)
    return wrapped


def _streaming(behavior):
    def wrapped(request_or_iterator, context):
        t0 = _clock()
        error = True
        try:
            yield from behavior(request_or_iterator, context)
            error = False
        finally:
            _native.after_request(_clock() - t0, error)
    return wrapped


_CONTROL = "/rsslab.v1.Control/"


# Wrapped handlers kept per interceptor: grpcio's generic handlers return
# the same method handler for every call of a method, so each is wrapped
# once, not on every call (the interceptor runs for each request of a busy
# service). A service that makes a new handler per call is wrapped per call
# once this many are kept.
_MAX_WRAPPED = 256


class _Kept:
    """id(handler) -> (handler, what to return for it); the pair holds the
    handler, so its id cannot be reused while it is kept."""

    def __init__(self, wrap):
        self._wrap = wrap
        self._kept = {}

    def __call__(self, handler, handler_call_details):
        known = self._kept.get(id(handler))
        if known is not None and known[0] is handler:
            return known[1]
        # Control on the service's own server (serve(server=)) is not the
        # service's load: not counted for the policy, not timed.
        if (handler_call_details.method or "").startswith(_CONTROL):
            return handler  # not kept: a catch-all handler may serve the service too
        wrapped = self._wrap(handler)
        if handler is not None and len(self._kept) < _MAX_WRAPPED:
            self._kept[id(handler)] = (handler, wrapped)
        return wrapped


class Interceptor(grpc.ServerInterceptor):
    def __init__(self):
        self._wrapped = _Kept(_wrap)

    def intercept_service(self, continuation, handler_call_details):
        return self._wrapped(continuation(handler_call_details), handler_call_details)


def _wrap(handler):
    if handler is None or not hasattr(handler, "_replace"):
        return handler
    if handler.unary_unary is not None:
        return handler._replace(unary_unary=_unary(handler.unary_unary))
    if handler.stream_unary is not None:
        return handler._replace(stream_unary=_unary(handler.stream_unary))
    if handler.unary_stream is not None:
        return handler._replace(unary_stream=_streaming(handler.unary_stream))
    if handler.stream_stream is not None:
        return handler._replace(stream_stream=_streaming(handler.stream_stream))
    return handler


def _aio_unary(behavior):
    async def wrapped(request_or_iterator, context):
        t0 = _clock()
        error = True
        try:
            r = await behavior(request_or_iterator, context)
            error = False
            return r
        finally:
            # Counted and timed as the sync interceptor's; the per-thread
            # release is for pool workers, which an event loop's thread is not.
            _native.after_request(_clock() - t0, error)
    return wrapped


def _aio_streaming(behavior):
    async def wrapped(request_or_iterator, context):
        t0 = _clock()
        error = True
        try:
            async for r in behavior(request_or_iterator, context):
                yield r
            error = False
        finally:
            _native.after_request(_clock() - t0, error)
    return wrapped


def _aio_wrap(handler, name, wrap):
    import inspect
    fn = getattr(handler, name)
    # grpc.aio also accepts plain (sync) handlers: those keep the sync wrapper.
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        return handler._replace(**{name: wrap(fn)})
    return handler._replace(**{name: (_unary if wrap is _aio_unary else _streaming)(fn)})


class AioInterceptor(grpc.aio.ServerInterceptor):
    """rsslab.grpc_interceptor(aio=True): the same counts for grpc.aio.server()."""

    def __init__(self):
        self._wrapped = _Kept(_aio_wrap_any)

    async def intercept_service(self, continuation, handler_call_details):
        return self._wrapped(await continuation(handler_call_details), handler_call_details)


def _aio_wrap_any(handler):
    if handler is None or not hasattr(handler, "_replace"):
        return handler
    for name, wrap in (("unary_unary", _aio_unary), ("stream_unary", _aio_unary),
                       ("unary_stream", _aio_streaming), ("stream_stream", _aio_streaming)):
        if getattr(handler, name) is not None:
            return _aio_wrap(handler, name, wrap)
    return handler
