#!/usr/bin/python3
"""//loadgen/http:bad_peers_test: HTTP peers that misbehave, each a clear
error for its own request, the requests already recorded kept.

One small socket server (here, so it can misbehave on purpose) answers by
path: /ok a 200 (keep-alive), /close closes mid-body, /trickle sends a byte
a second, /bigheaders 100 KiB of headers, /bigbody 2 MiB (over
--max_receive_mb=1), /redirect a 302 to /ok; another port answers with a
line that is not HTTP; a third is the same peer over h2c (python3-h2).
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402

LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")


def head(status, length, extra=b""):
    return (b"HTTP/1.1 %s\r\nContent-Length: %d\r\n%s\r\n" % (status, length, extra))


def answer(conn, path):
    """False: the connection is done."""
    if path == "/ok":
        conn.sendall(head(b"200 OK", 2) + b"ok")
        return True
    if path == "/once":
        # A whole keep-alive response, then the connection closed quietly (as
        # a server's idle timeout does).
        conn.sendall(head(b"200 OK", 2) + b"ok")
        return False
    if path == "/close":
        conn.sendall(head(b"200 OK", 100) + b"x" * 10)
        return False
    if path == "/trickle":
        conn.sendall(head(b"200 OK", 100))
        for _ in range(100):
            time.sleep(1)
            conn.sendall(b"x")
        return False
    if path == "/bigheaders":
        conn.sendall(head(b"200 OK", 2, b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000)
                                                 for i in range(100))) + b"ok")
        return True
    if path == "/bigbody":
        conn.sendall(head(b"200 OK", 2 << 20) + b"x" * (2 << 20))
        return True
    if path == "/redirect":
        conn.sendall(head(b"302 Found", 0, b"Location: /ok\r\n"))
        return True
    conn.sendall(head(b"404 Not Found", 0))
    return True


def serve_http(conn):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            req, _, buf = buf.partition(b"\r\n\r\n")
            path = req.split(b" ")[1].decode()
            if not answer(conn, path):
                return
    except OSError:
        pass
    finally:
        conn.close()


def serve_junk(conn):
    try:
        conn.recv(65536)
        conn.sendall(b"SSH-2.0-OpenSSH_9.2 not a web server\r\n")
    except OSError:
        pass
    conn.close()


def listen(handler):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(64)

    def loop():
        while True:
            c, _ = s.accept()
            threading.Thread(target=handler, args=(c,), daemon=True).start()
    threading.Thread(target=loop, daemon=True).start()
    return s.getsockname()[1]


def serve_h2(conn):
    """The bad peers over h2c: /ok, /close, /trickle, /bigbody."""
    import h2.config
    import h2.connection
    import h2.events
    h = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    h.initiate_connection()
    try:
        conn.sendall(h.data_to_send())
        while True:
            data = conn.recv(65536)
            if not data:
                return
            for ev in h.receive_data(data):
                if not isinstance(ev, h2.events.RequestReceived):
                    continue
                path = dict(ev.headers)[b":path"].decode()
                sid = ev.stream_id
                size = {"/ok": 2, "/close": 100, "/trickle": 100, "/bigbody": 2 << 20}.get(path, 0)
                h.send_headers(sid, [(":status", "200" if size else "404"),
                                     ("content-length", str(size))], end_stream=size == 0)
                if path == "/ok":
                    h.send_data(sid, b"ok", end_stream=True)
                elif path in ("/close", "/trickle"):
                    h.send_data(sid, b"x" * 10)
                elif path == "/bigbody":
                    for _ in range(size // 16384):
                        h.send_data(sid, b"x" * 16384)
                conn.sendall(h.data_to_send())
                if path == "/close":
                    return
                if path == "/trickle":
                    time.sleep(100)
            conn.sendall(h.data_to_send())
    except Exception:  # noqa: BLE001 (the peer's end, whatever it is)
        pass
    finally:
        conn.close()


HTTP = listen(serve_http)
JUNK = listen(serve_junk)
H2C = listen(serve_h2)


def loadgen(name, args):
    out = os.path.join(TMP, name)
    t = time.monotonic()
    r = subprocess.run([LOADGEN, "--out=" + out, "--progress=lines", "--deadline_ms=1500"] + args,
                       capture_output=True, text=True, timeout=60)
    loads = []
    try:
        with open(os.path.join(out, "events.jsonl")) as f:
            loads = [e["load"] for e in map(json.loads, f) if "load" in e]
    except OSError:
        pass
    return r, (loads[0] if loads else {}), time.monotonic() - t


def requests_file(name, paths):
    p = os.path.join(TMP, name)
    with open(p, "w") as f:
        f.write("".join("GET %s\n" % x for x in paths))
    return p


def mixed():
    """Every bad response among good ones: each counted by its kind, the
    others ok."""
    paths = ["/ok", "/close", "/ok", "/trickle", "/ok", "/bigheaders", "/ok", "/bigbody",
             "/ok", "/redirect", "/ok", "/missing"]
    f = requests_file("mixed.txt", paths)
    r, load, took = loadgen("mixed", ["--target=http://127.0.0.1:%d" % HTTP,
                                      "--requests_file=" + f, "--requests=%d" % len(paths),
                                      "--connections=4", "--max_receive_mb=1",
                                      "--max_errors=100"])
    want = {"200": "6", "CLOSED": "1", "TIMEOUT": "1", "TOO_LARGE": "2", "302": "1", "404": "1"}
    check(r.returncode == 0 and load.get("status_counts") == want
          and load.get("requests_ok") == "6" and load.get("requests_failed") == "6" and took < 20,
          "mixed: each bad peer failed its own request, by kind, the 6 good ones ok (exit %d, "
          "%.1f s): %s | %s" % (r.returncode, took, load.get("status_counts"), r.stderr[-300:]))


def one_each():
    """Each bad peer alone: the step fails with a clear first error, after
    the good requests before it were recorded."""
    cases = (("/close", "CLOSED: GET http://127.0.0.1:%d/close: the peer closed the connection "
                        "mid-response" % HTTP),
             ("/trickle", "TIMEOUT: GET http://127.0.0.1:%d/trickle: no whole response within "
                          "--deadline_ms=1500" % HTTP),
             ("/bigheaders", "TOO_LARGE: GET http://127.0.0.1:%d/bigheaders: response headers "
                             "over 64 KiB" % HTTP),
             ("/bigbody", "TOO_LARGE: GET http://127.0.0.1:%d/bigbody: a response body over "
                          "--max_receive_mb=1" % HTTP),
             ("/redirect", "HTTP 302 from GET http://127.0.0.1:%d/redirect (a redirect: not "
                           "followed without --follow_redirects)" % HTTP))
    for path, text in cases:
        f = requests_file(path[1:] + ".txt", ["/ok"] * 5 + [path])
        r, load, _ = loadgen(path[1:], ["--target=http://127.0.0.1:%d" % HTTP,
                                        "--requests_file=" + f, "--requests=6",
                                        "--connections=1", "--max_receive_mb=1"])
        check(r.returncode == 1 and load.get("requests_ok") == "5"
              and load.get("requests_failed") == "1"
              and load.get("first_error", "").startswith(text) and text in r.stderr,
              "%s: the step failed on it with %r, the 5 requests before it recorded ok "
              "(exit %d): %s | %s" % (path, text, r.returncode, load.get("first_error"),
                                      r.stderr[-300:]))


def h2c_each():
    """The same bad peers over h2c: each a clear error naming its request,
    the 5 before it recorded ok."""
    cases = (("/close", "CLOSED: GET http://127.0.0.1:%d/close: the peer closed the connection "
                        "mid-response" % H2C),
             ("/trickle", "TIMEOUT: GET http://127.0.0.1:%d/trickle: no whole response within "
                          "--deadline_ms=1500" % H2C),
             ("/bigbody", "TOO_LARGE: GET http://127.0.0.1:%d/bigbody: a response body over "
                          "--max_receive_mb=1" % H2C))
    for path, text in cases:
        f = requests_file("h2c" + path[1:] + ".txt", ["/ok"] * 5 + [path])
        r, load, _ = loadgen("h2c" + path[1:], ["--target=http://127.0.0.1:%d" % H2C,
                                                "--http_version=h2c", "--requests_file=" + f,
                                                "--requests=6", "--connections=1",
                                                "--concurrency=1", "--max_receive_mb=1"])
        check(r.returncode == 1 and load.get("requests_ok") == "5"
              and load.get("requests_failed") == "1"
              and load.get("first_error", "").startswith(text),
              "h2c %s: the step failed on it with %r, the 5 requests before it recorded ok "
              "(exit %d): %s | %s" % (path, text, r.returncode, load.get("first_error"),
                                      r.stderr[-300:]))


def not_http():
    r, load, _ = loadgen("junk", ["--target=http://127.0.0.1:%d/" % JUNK, "--requests=3"])
    err = load.get("first_error", "")
    check(r.returncode == 1 and err.startswith("BAD_RESPONSE: GET http://127.0.0.1:%d/: not an "
                                               "HTTP response" % JUNK)
          and int(load.get("requests_failed", 0)) >= 1,
          "a peer that is not HTTP: BAD_RESPONSE naming the request (exit %d): %s"
          % (r.returncode, err))
    r, load, _ = loadgen("junk-h2c", ["--target=http://127.0.0.1:%d/" % JUNK,
                                      "--http_version=h2c", "--requests=3"])
    err = load.get("first_error", "")
    # Over h2c, the peer may close before any HTTP/2 frame is parsed.
    check(r.returncode == 1 and (err.startswith("BAD_RESPONSE: GET http://127.0.0.1:%d/: " % JUNK)
                                 or err.startswith("CLOSED: GET http://127.0.0.1:%d/: " % JUNK)),
          "a peer that is not HTTP, over h2c: BAD_RESPONSE or CLOSED naming the request (exit "
          "%d): %s" % (r.returncode, err))


def keepalive_closed():
    """A server closing keep-alive connections after each response, without
    saying so: every request sent again on a new connection, none failed."""
    f = requests_file("once.txt", ["/once"])
    r, load, _ = loadgen("once", ["--target=http://127.0.0.1:%d" % HTTP, "--requests_file=" + f,
                                  "--requests=50", "--connections=2"])
    check(r.returncode == 0 and load.get("status_counts") == {"200": "50"},
          "a keep-alive connection closed by the server: reconnected, 50 ok (exit %d): %s | %s"
          % (r.returncode, load.get("status_counts"), r.stderr[-300:]))


def redirects_followed():
    r, load, _ = loadgen("follow", ["--target=http://127.0.0.1:%d/redirect" % HTTP,
                                    "--requests=20", "--follow_redirects"])
    check(r.returncode == 0 and load.get("status_counts") == {"200": "20"},
          "--follow_redirects: the 302s led to 200s (exit %d): %s | %s"
          % (r.returncode, load.get("status_counts"), r.stderr[-200:]))


if __name__ == "__main__":
    package_tree.run_parts("bad_peers_test", (mixed, one_each, h2c_each, not_http, keepalive_closed,
                                              redirects_followed))
