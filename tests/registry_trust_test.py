#!/usr/bin/python3
"""//tests:registry_trust_test: trust in the Control registry follows identity.

Anyone can write an entry saying service=shop. Two real grpcio servers
register as workers of `shop` the way the rsslab package does: one run by
this test's user (root), one by another user (nobody, through setuid). Each
records every call it gets, with its metadata, to a file. Then root's
rsslab_ctl:

- `--control=all:shop workers` lists root's worker and ignores nobody's with
  one line naming the user and the --as_user= that would trust it;
- `--control=all:shop --auth_token_file=T snapshot` calls root's worker (with
  the token) and sends nobody's no call and no token; `--control=pid:PID`
  of nobody's worker is refused the same way;
- with `--as_user=nobody` (and by uid) nobody's worker is trusted: listed,
  and called with the token;
- rsslab_loadgen's `--control=all:shop` (a scenario of one snapshot step)
  the same: nobody's worker reached only with `--as_user=nobody`;
- root's worker closes its port (its process and entry stay) and nobody's
  server binds that port: rsslab_ctl (`all:shop`, even with
  `--as_user=nobody`, and `pid:`) and the loadgen send it no call and no
  token, saying why in one line.

Needs root (to run a process as another user); passes saying so otherwise.
"""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
CTL = os.path.join(WS, "ctl/rsslab_ctl")
LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
PY = "/usr/bin/python3"
TOKEN = "registry-trust-test-token-5f1d"

# A plain grpcio server: any method answers an empty message (an empty
# Snapshot), after one JSON line per call (method, metadata) is appended to
# RECORD. Its entry is written like the package's (rsslab/_serve.py).
FAKE = r'''
import concurrent.futures, json, os, sys, grpc
run, record, service, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

class Any(grpc.GenericRpcHandler):
    def service(self, details):
        def answer(request, context):
            with open(record, "a") as f:
                f.write(json.dumps({"method": details.method,
                                    "metadata": [list(m) for m in details.invocation_metadata]}) + "\n")
            return b""
        return grpc.unary_unary_rpc_method_handler(answer)

server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
server.add_generic_rpc_handlers((Any(),))
port = server.add_insecure_port("127.0.0.1:%d" % port)
server.start()
with open("/proc/self/stat") as f:
    start = int(f.read().rsplit(")", 1)[1].split()[19])
pid = os.getpid()
tmp = os.path.join(run, ".rsslab-control-%d.addr.tmp" % pid)
with open(tmp, "w") as f:
    f.write("127.0.0.1:%d\nservice=%s\npid=%d\nstart=%d\n" % (port, service, pid, start))
os.replace(tmp, os.path.join(run, "rsslab-control-%d.addr" % pid))
print("ready", flush=True)
for line in sys.stdin:  # until the test closes it
    if line.strip() == "close":  # the port closed, the process and its entry left
        server.stop(None).wait()
        print("closed", flush=True)
'''


def check(cond, what, detail=""):
    if not cond:
        print("FAIL: %s\n%s" % (what, detail))
        sys.exit(1)
    print("ok: %s" % what)


def calls(record):
    try:
        with open(record) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root, to run a server as another user (nobody)")
        return 0
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        print("FAIL: no user 'nobody' to play the other user")
        return 1
    # Where both users' entries go (the reader's $XDG_RUNTIME_DIR), open to
    # both like /tmp; the records beside them.
    run = tempfile.mkdtemp(prefix="rsslab-trust-", dir="/tmp")
    os.chmod(run, 0o1777)
    token_file = os.path.join(run, "token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(TOKEN + "\n")
    env = {"PATH": "/usr/bin:/bin", "XDG_RUNTIME_DIR": run}
    procs = []
    try:
        def fake(name, user, service="shop", port=0):
            record = os.path.join(run, name + ".calls")
            kw = {}
            if user is not None:
                kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": [], "cwd": run}
            p = subprocess.Popen([PY, "-c", FAKE, run, record, service, str(port)], env=env,
                                 text=True,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, **kw)
            procs.append(p)
            check(p.stdout.readline().strip() == "ready", "%s's fake Control server is up" % name)
            return p.pid, record
        root_proc = None

        mine, mine_calls = fake("root", None)
        root_proc = procs[-1]
        theirs, their_calls = fake("nobody", nobody)
        check(os.stat(os.path.join(run, "rsslab-control-%d.addr" % theirs)).st_uid == nobody.pw_uid,
              "nobody's entry is nobody's file")

        def ctl(*args, binary=CTL):
            timeout = ["--timeout=10s"] if binary == CTL else ["--control_timeout=10s"]
            r = subprocess.run([binary] + timeout + list(args), env=env, capture_output=True, text=True,
                               timeout=60)
            return r.returncode, r.stdout, r.stderr

        scenario = os.path.join(run, "look.textproto")
        with open(scenario, "w") as f:
            f.write('name: "look"\nstep { name: "look" snapshot {} }\n')

        def loadgen(out, *args):
            return ctl("--scenario=" + scenario, "--control=all:shop", "--progress=lines",
                       "--auth_token_file=" + token_file, "--out=" + os.path.join(run, out),
                       *args, binary=LOADGEN)

        rc, out, err = ctl("--control=all:shop", "workers")
        listed = [line.split()[1] for line in out.splitlines() if line.startswith("pid ")]
        check(rc == 0 and listed == [str(mine)], "workers lists root's worker only",
              "rc %d\n%s%s" % (rc, out, err))
        why = [line for line in err.splitlines() if "rsslab-control-%d.addr" % theirs in line]
        check(len(why) == 1 and ("pid %d's entry is owned by uid %d (nobody), not trusted; pass "
                                 "--as_user=nobody to trust it" % (theirs, nobody.pw_uid)) in why[0],
              "workers says in one line why nobody's entry is ignored", err)

        rc, out, err = ctl("--control=all:shop", "--auth_token_file=" + token_file, "snapshot")
        check(rc == 0, "snapshot of all:shop succeeds on the trusted worker", out + err)
        got = calls(mine_calls)
        check(len(got) == 1 and got[0]["method"] == "/rsslab.v1.Control/GetSnapshot" and
              ["authorization", "Bearer " + TOKEN] in got[0]["metadata"],
              "root's worker got the snapshot call with the token", json.dumps(got))
        check(calls(their_calls) == [] and not os.path.exists(their_calls),
              "nobody's worker got no call and no token")

        rc, out, err = ctl("--control=pid:%d" % theirs, "--auth_token_file=" + token_file,
                           "snapshot")
        check(rc == 1 and "not trusted; pass --as_user=nobody" in err and
              not os.path.exists(their_calls),
              "--control=pid: of nobody's worker is refused, nothing sent", err)

        rc, out, err = loadgen("untrusted")
        check(rc == 0 and "not trusted; pass --as_user=nobody" in out + err and
              len(calls(mine_calls)) == 2 and not os.path.exists(their_calls),
              "the loadgen's snapshot step reaches root's worker, not nobody's", out + err)

        rc, out, err = ctl("--control=all:shop", "--as_user=nobody", "workers")
        listed = sorted(int(line.split()[1]) for line in out.splitlines() if line.startswith("pid "))
        check(rc == 0 and listed == sorted([mine, theirs]) and "not trusted" not in err,
              "--as_user=nobody: both workers listed", out + err)

        rc, out, err = ctl("--control=all:shop", "--as_user=%d" % nobody.pw_uid,
                           "--auth_token_file=" + token_file, "snapshot")
        got = calls(their_calls)
        check(rc == 0 and len(got) == 1 and ["authorization", "Bearer " + TOKEN] in got[0]["metadata"],
              "--as_user=UID: nobody's worker is called, with the token", out + err + json.dumps(got))

        rc, out, err = loadgen("trusted", "--as_user=nobody")
        got = calls(their_calls)
        check(rc == 0 and len(got) == 2 and ["authorization", "Bearer " + TOKEN] in got[1]["metadata"],
              "the loadgen with --as_user=nobody reaches nobody's worker", out + err)

        rc, out, err = ctl("--control=all:shop", "--as_user=no-such-user-rsslab", "workers")
        check(rc == 2 and "--as_user: no user named 'no-such-user-rsslab'" in err,
              "an unknown --as_user is a usage error", err)

        # The port in an entry is not taken on trust: root's worker closes its
        # port (its process and entry stay) and nobody binds it.
        with open(os.path.join(run, "rsslab-control-%d.addr" % mine)) as f:
            address = f.readline().strip()
        root_proc.stdin.write("close\n")
        root_proc.stdin.flush()
        check(root_proc.stdout.readline().strip() == "closed", "root's worker closed its port")
        thief, thief_calls = fake("thief", nobody, service="other",
                                  port=int(address.rsplit(":", 1)[1]))
        taken = ("pid %d's address %s is listened on by uid %d (nobody), not by the entry's "
                 "uid 0 (root): the port was taken over; nothing sent"
                 % (mine, address, nobody.pw_uid))
        for how, args in (("all:shop", ["--control=all:shop"]),
                          ("all:shop --as_user=nobody", ["--control=all:shop", "--as_user=nobody"]),
                          ("pid:", ["--control=pid:%d" % mine])):
            rc, out, err = ctl(*args, "--auth_token_file=" + token_file, "snapshot")
            why = [line for line in err.splitlines() if "taken over" in line]
            check(not os.path.exists(thief_calls) and len(why) == 1 and taken in why[0] and
                  (rc == 1 if how != "all:shop --as_user=nobody" else rc == 0),
                  "--control=%s: root's entry whose port nobody now holds gets no call and no "
                  "token, in one line: %s" % (how, why), "rc %d\n%s%s" % (rc, out, err))
        rc, out, err = loadgen("taken")
        check(not os.path.exists(thief_calls) and taken in out + err,
              "the loadgen sends nothing to the port nobody took over", out + err)
    finally:
        for p in procs:
            p.stdin.close()
            p.wait(timeout=10)
        shutil.rmtree(run, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
