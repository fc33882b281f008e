"""A byte-bounded LRU of Python objects with the rsslab.cache API.

The Python stand-in for the server's C++ cache (server/python/py_cache.cc,
which exists only inside rsslab_server): used by the grpcio peer
(peer_server.py) and by the handler-alone loop (handler_alone.py). Same
semantics: a key's charge is the value's length (bytes, bytearray, str) or
its __sizeof__(), plus the key; put() over the limit is refused; resize()
evicts at once.
"""

import collections
import threading


class Cache:
    """Byte-bounded LRU of Python objects, with the rsslab.cache API."""

    def __init__(self, limit):
        self._lock = threading.Lock()
        self._d = collections.OrderedDict()
        self._bytes = 0
        self._limit = limit
        self.hits = self.misses = self.evictions = self.puts = 0
        self.evicted_bytes = 0

    def _evict(self):
        while self._bytes > self._limit and self._d:
            _, (_, size) = self._d.popitem(last=False)
            self._bytes -= size
            self.evictions += 1
            self.evicted_bytes += size

    def put(self, key, value, size=None):
        if size is None:
            size = len(value) if isinstance(value, (bytes, bytearray, str)) else value.__sizeof__()
        size += len(key)
        with self._lock:
            self.puts += 1
            old = self._d.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self._limit:
                return False
            self._d[key] = (value, size)
            self._bytes += size
            self._evict()
            return True

    def get(self, key):
        with self._lock:
            item = self._d.get(key)
            if item is None:
                self.misses += 1
                return None
            self._d.move_to_end(key)
            self.hits += 1
            return item[0]

    def delete(self, key):
        with self._lock:
            item = self._d.pop(key, None)
            if item is None:
                return False
            self._bytes -= item[1]
            return True

    def resize(self, limit):
        with self._lock:
            self._limit = limit
            self._evict()

    def stats(self):
        with self._lock:
            return {"entries": len(self._d), "bytes": self._bytes, "limit_bytes": self._limit,
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                    "puts": self.puts, "evicted_bytes": self.evicted_bytes}
