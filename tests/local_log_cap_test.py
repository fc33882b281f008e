#!/usr/bin/python3
"""//tests:local_log_cap_test: a --local sweep's program logs are capped.

rsslab_loadgen --local launches each cell's program itself; its output goes
to servers/CELL.log in the run directory through the same log writer
rsslab_agent uses (agent/log_cap.h). A chatty command (a Python script
that prints CHATTY_MB MiB, half on stdout, half on stderr, then listens on
{port} and waits) is swept as one cell:

- by default (8 MiB) 12 MiB of output leave a log of at most 8 MiB: the
  loadgen's header and the first lines, one line saying how many bytes were
  dropped, and the last lines (the program's ready line among them);
- with --log_max_mb=1, 3 MiB leave at most 1 MiB the same way;
- --log_max_mb=-1 is a usage error naming the range.
"""

import glob
import os
import subprocess
import sys
import tempfile

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
LOADGEN = os.path.join(WS, "loadgen/rsslab_loadgen")
PROFILES = os.path.join(WS, "agent/profiles.textproto")

CHATTY = r'''#!/usr/bin/python3
import os, socket, sys, time
port = int(sys.argv[1].split("=", 1)[1])
line = "chatty " + "x" * 120 + "\n"
n = int(os.environ["CHATTY_MB"]) * (1 << 20) // (2 * (len(line) + 8))
for i in range(n):
    sys.stdout.write("%07d %s" % (i, line))
    sys.stderr.write("%07d %s" % (i, line))
sys.stdout.flush()
s = socket.socket()
s.bind(("127.0.0.1", port))
s.listen()
print("chatty listening, after %d lines" % n, flush=True)
time.sleep(600)
'''

SCENARIO = '''name: "chatty"
sweep { profiles: "glibc" threads: 1 repeats: 1 command: "chatty" }
step { name: "idle" wait { seconds: 0.1 } }
'''


def check(cond, what, detail=""):
    if not cond:
        print("FAIL: %s\n%s" % (what, detail[-3000:]))
        sys.exit(1)
    print("ok: %s" % what)


def sweep(tmp, name, mb, *flags):
    out = os.path.join(tmp, name)
    env = dict(os.environ, CHATTY_MB=str(mb))
    r = subprocess.run([LOADGEN, "--local", "--scenario=" + os.path.join(tmp, "chatty.textproto"),
                        "--allow_command=chatty=" + os.path.join(tmp, "chatty.py"),
                        "--allow_command_args=chatty=--port={port}",
                        "--profile_file=" + PROFILES, "--out=" + out, "--progress=lines"]
                       + list(flags), env=env, capture_output=True, text=True, timeout=120)
    return r, glob.glob(os.path.join(out, "servers", "*.log"))


def capped(tmp, name, mb, cap_mb, *flags):
    r, logs = sweep(tmp, name, mb, *flags)
    check(r.returncode == 0 and len(logs) == 1, "%s: the sweep ran its one cell" % name,
          r.stdout + r.stderr)
    size = os.path.getsize(logs[0])
    with open(logs[0], errors="replace") as f:
        lines = f.read().splitlines()
    marks = [l for l in lines if l.startswith("# rsslab_agent: ") and "dropped" in l]
    check(size <= cap_mb << 20, "%s: %d MiB of output left a log of %d bytes (cap %d MiB)"
          % (name, mb, size, cap_mb))
    check(len(marks) == 1 and "(log capped at %d MiB)" % cap_mb in marks[0],
          "%s: one line says what was dropped: %s" % (name, marks))
    check(lines[0].startswith("# rsslab_loadgen --local ") and lines[1].startswith("0000000 chatty"),
          "%s: the head kept (header, first line)" % name, "\n".join(lines[:3]))
    check(lines[-1].startswith("chatty listening"), "%s: the tail kept: %s" % (name, lines[-1]))


def main():
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    with open(os.path.join(tmp, "chatty.py"), "w") as f:
        f.write(CHATTY)
    os.chmod(os.path.join(tmp, "chatty.py"), 0o755)
    with open(os.path.join(tmp, "chatty.textproto"), "w") as f:
        f.write(SCENARIO)
    capped(tmp, "default", 12, 8)
    capped(tmp, "one", 3, 1, "--log_max_mb=1")
    r, _ = sweep(tmp, "bad", 1, "--log_max_mb=-1")
    check(r.returncode == 2 and "--log_max_mb=-1 is out of range (0, or 1 to 65536 MiB)" in r.stderr,
          "--log_max_mb=-1: a usage error naming the range", r.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
