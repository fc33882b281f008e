"""rsslab.grpc_interceptor(): counts requests and runs a pending per-thread
release on the worker that just served one (grpcio server interceptor)."""

import grpc

from . import _rsslab as _native


def _after():
    _native.count_request(1)
    # Cheap when no release is pending (an atomic flag); otherwise this
    # worker's share of the pass runs here, before it takes the next call.
    _native.visit(False)


def _unary(behavior):
    def wrapped(request_or_iterator, context):
        try:
            return behavior(request_or_iterator, context)
        finally:
            _after()
    return wrapped


def _streaming(behavior):
    def wrapped(request_or_iterator, context):
        try:
            yield from behavior(request_or_iterator, context)
        finally:
            _after()
    return wrapped


class Interceptor(grpc.ServerInterceptor):
    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
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
