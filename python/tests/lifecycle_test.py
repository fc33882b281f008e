#!/usr/bin/python3
"""//python:lifecycle_test: the package's lifecycle, fork and bounds.

Small real processes (Debian's /usr/bin/python3 with python3-grpcio, the
Bazel-built extension, rsslab_ctl against the Control service on a loopback
port), each case a few seconds:

- fork() after serve(), both transports: the child's life and exit leave
  the parent's Control answering and its address file in place; the child
  starts with no Control, and its serve() is refused in one line (gRPC
  cannot serve after a fork once it ran); a child of a master that did
  not serve serves its own;
- serve/stop/serve three times, both transports; stop() twice, after
  which control_address() is "";
- an on_phase callback that never returns: the call ends within the Python
  deadline, frees its slot (GetSnapshot still answers after more such calls
  than there are slots), and stop() returns within a second and a half;
- a slow cache_stats callback does not stretch a snapshot past the deadline;
- a callback's 10,000-byte exception with ESC, CR and LF comes back escaped
  on one line of at most 1 KiB, both transports;
- serve(server=) follows the addresses the process really listens on: a
  server on 0.0.0.0, or on 127.0.0.1:P and 0.0.0.0:Q with control= naming
  P, needs the token (in a network namespace of its own, so nothing beyond
  this test can reach it);
- cap_arenas() with MALLOC_ARENA_MAX or GLIBC_TUNABLES' arena_max at start;
- grpc_interceptor() and serve(server=) without grpcio: one line naming the
  package to install;
- the registry entry is written through a fresh temporary file: another
  user's file or symlink at the names it tries (or at the fixed name once
  used) is neither written nor followed, and the entry is serve()'s own.
"""

import json
import os
import subprocess
import sys
import tempfile

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check  # noqa: E402
CTL = os.path.join(WS, "ctl/rsslab_ctl")
PY = "/usr/bin/python3"


PKG = package_tree.make(WS, TMP)


def env(extra=None):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("MALLOC_", "GLIBC_TUNABLES", "LD_PRELOAD"))}
    e.update({"PYTHONPATH": PKG, "RSSLAB_CTL": CTL, "XDG_RUNTIME_DIR": TMP})
    e.update(extra or {})
    return e


def snippet(code, *args, extra_env=None, timeout=60, prefix=()):
    return subprocess.run(list(prefix) + [PY, "-c", COMMON + code] + list(args),
                          capture_output=True, text=True, env=env(extra_env), cwd=TMP,
                          timeout=timeout)


# Shared by every snippet: rsslab_ctl as a subprocess.
COMMON = r"""
import os, subprocess, sys, threading, time
def ctl(addr, *args, timeout="10s", token=None):
    cmd = [os.environ["RSSLAB_CTL"], "--control=" + addr, "--timeout=" + timeout]
    if token:
        cmd.append("--auth_token_file=" + token)
    t0 = time.monotonic()
    r = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip(), time.monotonic() - t0
"""

FORK = r"""
import grpc, rsslab
tr, serve_first = sys.argv[1], sys.argv[2] == "parent_serves"
addr = rsslab.serve("127.0.0.1:0", transport=tr) if serve_first else ""
rsslab.snapshot()
if addr:
    ctl(addr, "snapshot")  # the GIL helper and the transport's threads have run
mine = os.path.join(os.environ["XDG_RUNTIME_DIR"], "rsslab-control-%d.addr" % os.getpid())
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    own = rsslab.control_address()
    try:
        child = rsslab.serve("127.0.0.1:0", transport=tr)
        code, out, _ = ctl(child, "snapshot")
        served = "%d %s" % (code, out.splitlines()[0] if out else "")
    except RuntimeError as e:
        served = "refused " + str(e)
    os.write(w, ("%s|%s\n" % (own, served)).encode())
    sys.exit(0)  # atexit runs rsslab's stop in the child
os.close(w)
line = os.read(r, 4096).decode().strip()
_, status = os.waitpid(pid, 0)
own, child_served = line.split("|", 1) if "|" in line else ("?", line)
print("child_status", status)
print("child_had_control", repr(own))
print("child_served", child_served[:300])
print("child_addr_file_left", os.path.exists(os.path.join(os.environ["XDG_RUNTIME_DIR"],
                                                         "rsslab-control-%d.addr" % pid)))
print("parent_addr_file", os.path.exists(mine))
if addr:
    code, out, _ = ctl(addr, "snapshot")
    print("parent_ctl", code, out.splitlines()[0] if out else "")
"""


def fork_result(tr, how):
    r = snippet(FORK, tr, how)
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    check(out.get("child_status") == "0",
          "%s, %s: a child forked after import exits 0 (status %s) %s"
          % (tr, how, out.get("child_status"), r.stderr.strip()[-300:]))
    check(out.get("child_had_control") == "''",
          "%s, %s: the child starts with no Control of its own (%s)"
          % (tr, how, out.get("child_had_control")))
    check(out.get("child_addr_file_left") == "False",
          "%s, %s: no address file of the child's is left after its exit" % (tr, how))
    return out


def fork_checks():
    for tr in ("grpcio", "native"):
        # A pre-fork master that serves: the child cannot (gRPC's threads
        # stayed in the parent) and says so; the parent is unaffected.
        out = fork_result(tr, "parent_serves")
        check(out.get("child_served", "").startswith("refused serve() in a child forked after")
              and "Pre-fork servers" in out.get("child_served", ""),
              "%s: serve() in a child of a serving parent is refused in one line: %s"
              % (tr, out.get("child_served")))
        check(out.get("parent_addr_file") == "True",
              "%s: the parent's address file survives the child's exit" % tr)
        check(out.get("parent_ctl", "").startswith("0 "),
              "%s: the parent's Control answers after the child's exit: %s"
              % (tr, out.get("parent_ctl")))
        # A master that imported the package (and grpc) but serves nothing:
        # each worker serves its own Control after the fork.
        out = fork_result(tr, "worker_serves")
        check(out.get("child_served", "").startswith("0 "),
              "%s: a child of a master that did not serve serves Control itself: %s"
              % (tr, out.get("child_served")))


RESERVE = r"""
import grpc, rsslab
tr = sys.argv[1]
rsslab.on_phase("fill", lambda limit: None)
for i in range(3):
    addr = rsslab.serve("127.0.0.1:0", transport=tr)
    f = os.path.join(os.environ["XDG_RUNTIME_DIR"], "rsslab-control-%d.addr" % os.getpid())
    code, out, _ = ctl(addr, "phase", "fill")
    print("round", i, code, os.path.exists(f), out.splitlines()[0][:100] if out else "")
    rsslab.stop()
    t0 = time.monotonic()
    rsslab.stop()
    code, out, _ = ctl(addr, "snapshot", timeout="3s")
    print("stopped", i, code != 0, os.path.exists(f), "%.2f" % (time.monotonic() - t0),
          repr(rsslab.control_address()))
"""


def reserve_checks():
    for tr in ("grpcio", "native"):
        r = snippet(RESERVE, tr, timeout=90)
        rounds = [l.split() for l in r.stdout.splitlines() if l.startswith("round")]
        stops = [l.split() for l in r.stdout.splitlines() if l.startswith("stopped")]
        check(len(rounds) == 3 and all(x[2] == "0" and x[3] == "True" for x in rounds),
              "%s: serve/stop/serve three times: SetPhase answers each time %s %s"
              % (tr, rounds, r.stderr.strip()[-300:]))
        check(len(stops) == 3 and all(x[2] == "True" and x[3] == "False" for x in stops),
              "%s: after stop() (twice) Control no longer answers and the address file is "
              "gone: %s" % (tr, stops))
        check(len(stops) == 3 and all(x[5] == "''" for x in stops),
              "%s: after stop() control_address() is '': %s" % (tr, [x[5:] for x in stops]))


BLOCKED = r"""
import grpc, rsslab
tr = sys.argv[1]
never = threading.Event()
rsslab.on_phase("fill", lambda limit: never.wait())
addr = rsslab.serve("127.0.0.1:0", transport=tr)
code, out, took = ctl(addr, "phase", "fill", timeout="8s")
print("first", code, "%.2f" % took, out.splitlines()[-1][:160] if out else "")
# More blocked calls than there are call slots (12), 8 at a time.
res = []
def one():
    res.append(ctl(addr, "phase", "fill", timeout="8s"))
ts = [threading.Thread(target=one) for _ in range(14)]
t0 = time.monotonic()
for i, t in enumerate(ts):
    t.start()
    if i % 8 == 7:
        time.sleep(2.5)
[t.join() for t in ts]
print("many", len(res), "%.2f" % max(r[2] for r in res),
      sum(1 for r in res if "RESOURCE_EXHAUSTED" in r[1] or "more than" in r[1]))
code, out, took = ctl(addr, "snapshot", timeout="8s")
print("snapshot", code, "%.2f" % took)
slow = threading.Event()
rsslab.cache_stats(lambda: (slow.wait(20), {"entries": 1})[1])
code, out, took = ctl(addr, "snapshot", timeout="8s")
print("slow_cache_stats", code, "%.2f" % took)
t0 = time.monotonic()
rsslab.stop()
print("stop", "%.2f" % (time.monotonic() - t0))
"""


def blocked_checks():
    for tr in ("grpcio", "native"):
        r = snippet(BLOCKED, tr, timeout=60)
        out = {l.split(" ", 1)[0]: l.split()[1:] for l in r.stdout.splitlines() if " " in l}
        first = out.get("first", ["?", "99"])
        check(first[0] != "0" and float(first[1]) < 4.0,
              "%s: a blocked on_phase callback: the call ends in %s s (Python deadline 2 s, "
              "caller's 8 s): %s %s" % (tr, first[1], " ".join(first[2:]),
                                        r.stderr.strip()[-300:]))
        many = out.get("many", ["0", "99", "99"])
        check(many[0] == "14" and float(many[1]) < 6.0 and many[2] == "0",
              "%s: 14 calls on blocked callbacks: none refused for want of a slot, the "
              "longest %s s" % (tr, many[1]))
        snap = out.get("snapshot", ["1", "99"])
        check(snap[0] == "0" and float(snap[1]) < 4.0,
              "%s: GetSnapshot answers after them in %s s" % (tr, snap[1]))
        slow = out.get("slow_cache_stats", ["1", "99"])
        check(slow[0] == "0" and float(slow[1]) < 4.0,
              "%s: a cache_stats callback that blocks: the snapshot answers in %s s (deadline "
              "8 s)" % (tr, slow[1]))
        stop = out.get("stop", ["99"])
        check(float(stop[0]) < 1.5, "%s: stop() with blocked callbacks takes %s s"
              % (tr, stop[0]))


RAISES = r"""
import grpc, rsslab
tr = sys.argv[1]
def boom(limit):
    raise RuntimeError("\x1b[2J" + "A\r\nB" * 2500)
rsslab.on_phase("fill", boom)
addr = rsslab.serve("127.0.0.1:0", transport=tr)
code, out, took = ctl(addr, "phase", "fill")
import json
sys.stdout.write(json.dumps(out))
"""


def raises_checks():
    for tr in ("grpcio", "native"):
        r = snippet(RAISES, tr)
        try:
            out = json.loads(r.stdout)
        except ValueError:
            out = ""
        lines = out.splitlines()
        # rsslab_ctl escapes what a peer sent once more (a backslash as two):
        # the bound is on the message the service sent.
        sent = out.replace("\\\\", "\\")
        check(len(lines) == 1 and "\\x1b[2J" in sent and "\\r\\n" in sent
              and "\x1b" not in out and len(sent.encode()) <= 1024 + 200,
              "%s: a 10,000-byte exception with ESC/CR/LF comes back escaped on one line of %d "
              "bytes: %r %s" % (tr, len(sent.encode()), out[:120], r.stderr.strip()[-200:]))


TOKEN = r"""
import grpc, rsslab, concurrent.futures as cf
host = sys.argv[1]
s = grpc.server(cf.ThreadPoolExecutor(2))
# "mixed": control= names the loopback port, the server also listens on 0.0.0.0.
port = s.add_insecure_port(("127.0.0.1" if host == "mixed" else host) + ":0")
if host == "mixed":
    s.add_insecure_port("0.0.0.0:0")
try:
    # No control=: the one port the process listens on (the five lines' form).
    got = rsslab.serve(server=s) if len(sys.argv) > 2 else rsslab.serve("127.0.0.1:%d" % port,
                                                                          server=s)
    print("accepted", got == "127.0.0.1:%d" % port)
except ValueError as e:
    print("refused", e)
tok = os.path.join(os.environ["XDG_RUNTIME_DIR"], "token")
with open(tok, "w") as f:
    f.write("0123456789abcdef0123456789abcdef\n")
os.chmod(tok, 0o600)
if rsslab.control_address() == "":
    rsslab.serve("127.0.0.1:%d" % port, server=s, token_file=tok)
    print("with_token", rsslab.control_address())
"""


def token_checks():
    # 0.0.0.0 only inside a network namespace of its own (loopback alone).
    ns = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    probe = subprocess.run(ns + ["true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("skip  serve(server=) on 0.0.0.0: no network namespace here (%s)"
              % probe.stderr.strip()[:200])
    else:
        r = snippet(TOKEN, "0.0.0.0", prefix=ns)
        check("refused" in r.stdout and "beyond loopback" in r.stdout
              and "auth_token_file" in r.stdout,
              "serve('127.0.0.1:P', server=s) with s on 0.0.0.0:P and no token is refused: %s %s"
              % (r.stdout.strip()[:300], r.stderr.strip()[-200:]))
        check("with_token 127.0.0.1:" in r.stdout,
              "... and accepted with token_file=: %s" % r.stdout.strip()[-100:])
        r = snippet(TOKEN, "mixed", prefix=ns)
        # grpcio binds 0.0.0.0 as [::] (both families) where IPv6 is up.
        check("refused" in r.stdout and ("listens on 0.0.0.0:" in r.stdout
                                         or "listens on [::]:" in r.stdout)
              and "beyond loopback" in r.stdout and "auth_token_file" in r.stdout,
              "serve('127.0.0.1:P', server=s) with s on 127.0.0.1:P and 0.0.0.0:Q and no token "
              "is refused naming 0.0.0.0:Q (or [::]:Q): %s %s"
              % (r.stdout.strip()[:300], r.stderr.strip()[-200:]))
        check("with_token 127.0.0.1:" in r.stdout,
              "... and accepted with token_file=: %s" % r.stdout.strip()[-100:])
    r = snippet(TOKEN, "127.0.0.1", "discover")
    check(r.stdout.startswith("accepted True"),
          "serve(server=s) with s on 127.0.0.1 only needs no token, and without control= "
          "serves on s's port: %s %s" % (r.stdout.strip()[:200], r.stderr.strip()[-200:]))


ARENAS = r"""
import rsslab
for n in (int(a) for a in sys.argv[1:]):
    try:
        print(n, "ok", rsslab.cap_arenas(n))
    except rsslab.ArenaCapError as e:
        print(n, "raised", e)
"""


def arena_checks():
    cases = [({"MALLOC_ARENA_MAX": "1"}, "MALLOC_ARENA_MAX=1"),
             ({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, "glibc.malloc.arena_max=2")]
    for extra, name in cases:
        want = name.rsplit("=", 1)[1]
        r = snippet(ARENAS, "4", want, extra_env=extra)
        lines = r.stdout.splitlines()
        check(len(lines) == 2 and lines[0].startswith("4 raised") and name in lines[0],
              "%s at start: cap_arenas(4) raises ArenaCapError naming it: %s %s"
              % (name, lines[:1], r.stderr.strip()[-200:]))
        check(len(lines) == 2 and "'applied': False" in lines[1] and "no-op" in lines[1],
              "%s at start: cap_arenas(%s) is a no-op saying so: %s" % (name, want, lines[1:]))


NO_GRPC = r"""
sys.modules["grpc"] = None  # what a Python without grpcio sees: ImportError
import rsslab
for what, fn in (("interceptor", rsslab.grpc_interceptor),
                 ("server", lambda: rsslab.serve("127.0.0.1:1", server=object())),
                 ("transport", lambda: rsslab.serve("127.0.0.1:0", transport="grpcio"))):
    try:
        fn()
        print(what, "no error")
    except ImportError as e:
        print(what, type(e).__name__, e)
"""


def no_grpc_checks():
    r = snippet(NO_GRPC)
    lines = r.stdout.splitlines()
    check(len(lines) == 3 and all("python3-grpcio" in l and "grpcio (pip)" in l for l in lines),
          "without grpcio, grpc_interceptor(), serve(server=) and serve(transport='grpcio') "
          "name the package to install: %s %s" % (lines, r.stderr.strip()[-300:]))


PLANTED = r"""
import stat
import rsslab
from rsslab import _serve
d, pid = os.environ["XDG_RUNTIME_DIR"], os.getpid()
other = 65534 if os.geteuid() == 0 else os.geteuid()  # nobody, when root
# The temporary names the writer will try first, taken in advance by another
# user: a file of theirs, then a symlink of theirs to a file of ours.
names = iter(["planted", "link"])
_serve._tmp_suffix = lambda: next(names, None) or os.urandom(8).hex()
planted = os.path.join(d, ".rsslab-control-%d.planted.tmp" % pid)
link = os.path.join(d, ".rsslab-control-%d.link.tmp" % pid)
fixed = os.path.join(d, ".rsslab-control-%d.addr.tmp" % pid)  # a fixed name, once
victim = os.path.join(d, "victim-%d" % pid)
for p in (planted, fixed, victim):
    with open(p, "w") as f:
        f.write("theirs\n")
os.symlink(victim, link)
try:
    for p in (planted, fixed):
        os.chown(p, other, other)
    os.lchown(link, other, other)
except OSError:  # a sandbox mapping root alone: planted as ourselves
    other = os.geteuid()
addr = rsslab.serve("127.0.0.1:0", transport="native")
final = os.path.join(d, "rsslab-control-%d.addr" % pid)
st = os.lstat(final)
with open(final) as f:
    first = f.readline().strip()
print("entry", st.st_uid == os.geteuid() and stat.S_ISREG(st.st_mode) and first == addr)
print("untouched", all(open(p).read() == "theirs\n" for p in (planted, fixed, victim))
      and os.lstat(planted).st_uid == other and os.path.islink(link))
print("called", ctl("pid:%d" % pid, "snapshot")[0])
print("other", other)
rsslab.stop()
left = [n for n in os.listdir(d) if n.startswith(".rsslab-control-%d." % pid)]
print("left", sorted(left) == sorted(os.path.basename(p) for p in (planted, link, fixed)))
"""


def planted_checks():
    r = snippet(PLANTED)
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if " " in line)
    check(out.get("entry") == "True",
          "serve() registers an entry of its own user even when its temporary names were "
          "taken by another user's file and symlink: %s %s" % (out, r.stderr.strip()[-300:]))
    check(out.get("untouched") == "True" and out.get("left") == "True",
          "the planted file and the symlink's target are left as they were, and no "
          "temporary file of serve()'s is left: %s" % out)
    check(out.get("called") == "0", "rsslab_ctl --control=pid: reaches that entry: %s" % out)


def main():
    package_tree.run_parts("lifecycle_test", (
        fork_checks, reserve_checks, blocked_checks, raises_checks,
        token_checks, arena_checks, no_grpc_checks, planted_checks))


if __name__ == "__main__":
    main()
