#!/usr/bin/python3
"""A user's own grpcio service for //tests/anysvc (nothing of rsslab in it).

Serves shop.v1.Cart/Add and the streaming Track, Bulk and Chat from
tests/anysvc/shop.proto (stubs generated at start with /usr/bin/protoc and
grpc_python_plugin), counts every request, stream and message and what it
carried, and on SIGTERM writes the counts as JSON to
--stats_file, then exits 0.

  shop_service.py --port=0 --threads=4 --stats_file=/tmp/stats.json
      [--hold_kb=N] (keeps N KiB per request) [--start_after_s=S] (listens only after S s)
      [--sigterm=default] (no handler: SIGTERM kills it, Python's default)
      [--exit_after_requests=N] (exits 3 at its Nth request: a service that dies)

Prints `shop ready data=127.0.0.1:PORT pid=PID` once it serves.
"""

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _stubs():
    out = tempfile.mkdtemp(prefix="shop-stubs-")
    subprocess.run(["/usr/bin/protoc", "-I", HERE, "--python_out=" + out, "--grpc_out=" + out,
                    "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
                    os.path.join(HERE, "shop.proto")], check=True)
    sys.path.insert(0, out)


_stubs()
import grpc  # noqa: E402
import shop_pb2  # noqa: E402
import shop_pb2_grpc  # noqa: E402


class Cart(shop_pb2_grpc.CartServicer):
    """Add counts; Refund is left to the generated base (UNIMPLEMENTED)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0
        self.ids = set()
        self.duplicates = 0
        self.well_formed = 0  # nested item, enum, repeated fields as sent
        self.metadata = {}
        self.hold = []  # --hold_kb: memory the service keeps per request
        self.streams = {}  # streaming methods' counts (see _message)

    def Add(self, request, context):
        ok = (request.item.kind == shop_pb2.TOY and request.item.sku.startswith("S")
              and 1 <= request.item.qty <= 9 and list(request.tags[:1]) == ["fixed"]
              and len(request.tags) == 2 and request.tags[1] == "t%d" % request.id
              and len(request.extra) == 2 and request.extra[1].kind == shop_pb2.BOOK
              and request.customer.startswith("user-%d-" % request.id)
              and len(request.customer) == len("user-%d-" % request.id) + 6)
        with self.lock:
            self.count += 1
            if request.id in self.ids:
                self.duplicates += 1
            self.ids.add(request.id)
            self.well_formed += 1 if ok else 0
            for k, v in context.invocation_metadata():
                if k.startswith("x-"):
                    self.metadata["%s=%s" % (k, v)] = self.metadata.get("%s=%s" % (k, v), 0) + 1
            if ARGS.hold_kb:
                self.hold.append(bytearray(ARGS.hold_kb * 1024))
            if ARGS.exit_after_requests and self.count >= ARGS.exit_after_requests:
                os._exit(3)
        return shop_pb2.Receipt(id=request.id, note="ok")

    def _message(self, method, request):
        """Counts one streamed order: (id, its message index in item.qty)."""
        with self.lock:
            key = method + "_pairs"
            self.streams.setdefault(key, set()).add((request.id, request.item.qty))
            self.streams[method + "_messages"] = self.streams.get(method + "_messages", 0) + 1
            # --data_file lines in turn by message: even ones say "a", odd "b".
            if request.customer and request.customer == "ab"[request.item.qty % 2]:
                self.streams[method + "_in_turn"] = self.streams.get(method + "_in_turn", 0) + 1

    def _stream(self, method):
        with self.lock:
            self.streams[method + "_calls"] = self.streams.get(method + "_calls", 0) + 1

    def Track(self, request, context):
        self._stream("track")
        self._message("track", request)
        for i in range(request.item.qty):
            yield shop_pb2.Receipt(id=request.id, note="t%d" % i)

    def Bulk(self, request_iterator, context):
        self._stream("bulk")
        n = 0
        for request in request_iterator:
            self._message("bulk", request)
            n += 1
        return shop_pb2.Receipt(note=str(n))

    def Chat(self, request_iterator, context):
        self._stream("chat")
        for request in request_iterator:
            self._message("chat", request)
            if "abort" in request.tags and request.item.qty == 2 and request.id % 5 == 0:
                with self.lock:
                    self.streams["chat_aborted"] = self.streams.get("chat_aborted", 0) + 1
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "out of stock")
            yield shop_pb2.Receipt(id=request.id, note="c%d" % request.item.qty)

    def stats(self):
        with self.lock:
            streams = {k: (len(v) if isinstance(v, set) else v) for k, v in self.streams.items()}
            return {"streams": streams, "count": self.count, "distinct": len(self.ids),
                    "duplicates": self.duplicates,
                    "min_id": min(self.ids) if self.ids else -1,
                    "max_id": max(self.ids) if self.ids else -1,
                    "well_formed": self.well_formed, "metadata": self.metadata}


def main():
    if ARGS.start_after_s:
        time.sleep(ARGS.start_after_s)  # a slow start-up, before it listens
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=ARGS.threads))
    cart = Cart()
    shop_pb2_grpc.add_CartServicer_to_server(cart, server)
    port = server.add_insecure_port("127.0.0.1:%d" % ARGS.port)
    server.start()
    done = threading.Event()
    if ARGS.sigterm != "default":
        signal.signal(signal.SIGTERM, lambda *_: done.set())
    print("shop ready data=127.0.0.1:%d pid=%d" % (port, os.getpid()), flush=True)
    done.wait()
    server.stop(grace=1).wait()
    if ARGS.stats_file:
        with open(ARGS.stats_file + ".tmp", "w") as f:
            json.dump(cart.stats(), f)
        os.rename(ARGS.stats_file + ".tmp", ARGS.stats_file)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--stats_file", default="")
    p.add_argument("--hold_kb", type=int, default=0)
    p.add_argument("--start_after_s", type=float, default=0)
    p.add_argument("--sigterm", choices=["handled", "default"], default="handled")
    p.add_argument("--exit_after_requests", type=int, default=0)
    ARGS = p.parse_args()
    main()
