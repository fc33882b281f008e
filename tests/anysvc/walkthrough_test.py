#!/usr/bin/python3
"""//tests/anysvc:walkthrough_test: docs/WALKTHROUGH.md's commands, run as written.

Every command of the page's ```sh blocks runs in order with bash, from a
directory laid out as the repository is after `./rsslab build` (bin/, the
shop service, agent/profiles.textproto), so the page cannot drift from what
the tools do. Substituted: port 50070 by a free loopback port, PID by the pid
the last started service's ready line printed, and venv/bin/python by
/usr/bin/python3 with the package as Bazel built it on PYTHONPATH (the venv
itself is //python:package_test's). A command ending in `&` starts the
service and waits for its ready line; `kill PID` waits for it to exit 0.
Each command must exit 0 and print every "..." of its `# shows:` comment;
the four steps' commands (inspect, a unary and a streaming call, the five
lines with snapshot and trim, the sweep) must be on the page, each with a
`# shows:`.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

WS = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")
TMP = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
DOC = os.path.join(WS, "docs/WALKTHROUGH.md")
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check, failures  # noqa: E402

DOC_PORT = "50070"
# What the page must keep: each of these in some command that has a # shows:.
REQUIRED = ["bin/rsslab_ctl inspect --pid=PID", "--call=shop.v1.Cart/Add",
            "--call=shop.v1.Cart/Chat", "rsslab.serve(server=server)", " snapshot", " trim",
            "--builtin=sweep --local", "--profiles=glibc-arena2,jemalloc"]


def doc_commands(text):
    """The ```sh blocks' commands in order: continuation lines joined, a
    heredoc kept with its body, blank lines dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            cmd = lines[i]
            i += 1
            while cmd.rstrip().endswith("\\") and i < len(lines):
                cmd += "\n" + lines[i]
                i += 1
            heredoc = re.search(r"<<'(\w+)'", cmd)
            if heredoc:
                while i < len(lines):
                    cmd += "\n" + lines[i]
                    i += 1
                    if lines[i - 1] == heredoc.group(1):
                        break
            if cmd.strip():
                commands.append(cmd)
    return commands


def shows(cmd):
    """The "..." texts of a command's `# shows:` comment (first line's or last's)."""
    found = re.search(r"#\s*shows:(.*)$", cmd.split("\n", 1)[0]) or re.search(
        r"#\s*shows:(.*)$", cmd.rsplit("\n", 1)[-1])
    return re.findall(r'"([^"]*)"', found.group(1)) if found else []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def layout():
    """TMP/repo: what the page's relative paths name in a built checkout."""
    repo = os.path.join(TMP, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    for d in ("bin", "tests/anysvc", "agent", "venv/bin"):
        os.makedirs(os.path.join(repo, d))
    os.symlink(os.path.join(WS, "loadgen/rsslab_loadgen"), os.path.join(repo, "bin/rsslab_loadgen"))
    os.symlink(os.path.join(WS, "control/rsslab_ctl"), os.path.join(repo, "bin/rsslab_ctl"))
    for f in ("shop_service.py", "shop.proto"):
        shutil.copy(os.path.join(WS, "tests/anysvc", f), os.path.join(repo, "tests/anysvc"))
    shutil.copy(os.path.join(WS, "agent/profiles.textproto"), os.path.join(repo, "agent"))
    python = os.path.join(repo, "venv/bin/python")
    with open(python, "w") as f:
        f.write('#!/bin/sh\nPYTHONPATH=%s exec /usr/bin/python3 "$@"\n' % package_tree.make(WS, TMP))
    os.chmod(python, 0o755)
    return repo


def start(cmd, repo):
    """A `... &` command: started, its output read up to the ready line."""
    line = cmd.split("#", 1)[0].strip()
    assert line.endswith("&"), line
    proc = subprocess.Popen(["bash", "-c", "exec " + line[:-1]], cwd=repo, text=True,
                            stdout=subprocess.PIPE, stderr=open(os.path.join(TMP, "svc.err"), "a"))
    out, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline:
        got = proc.stdout.readline()
        if not got:
            break
        out += got
        if got.startswith("shop ready "):
            break
    pid = re.search(r"pid=(\d+)", out)
    return proc, (pid.group(1) if pid else ""), out


def main():
    commands = doc_commands(open(DOC).read())
    check(len(commands) >= 10, "docs/WALKTHROUGH.md: %d commands in its sh blocks" % len(commands))
    for want in REQUIRED:
        check(any(want in c and shows(c) for c in commands),
              "docs/WALKTHROUGH.md runs %r with a # shows:" % want)
    repo = layout()
    port = free_port()
    service, pid = None, ""
    try:
        for cmd in commands:
            cmd = cmd.replace(DOC_PORT, port)
            cmd = re.sub(r"\bPID\b", pid, cmd)
            first = cmd.split("\n", 1)[0][:110]
            t0 = time.monotonic()
            if cmd.split("#", 1)[0].strip().endswith("&"):
                service, pid, out = start(cmd, repo)
                ok = bool(pid)
            else:
                r = subprocess.run(["bash", "-c", cmd], cwd=repo, capture_output=True, text=True,
                                   timeout=180)
                out = r.stdout + r.stderr
                ok = r.returncode == 0
                if re.match(r"kill \d+", cmd) and service:
                    try:
                        ok = ok and service.wait(timeout=20) == 0
                    except subprocess.TimeoutExpired:
                        ok = False
                    service = None
            missing = [s for s in shows(cmd) if s not in out]
            check(ok and not missing,
                  "%s (%.1f s)%s%s" % (first, time.monotonic() - t0,
                                       "" if ok else ": failed",
                                       " missing %r" % missing if missing else "")
                  + ("" if ok and not missing else "\n" + out[-2000:]))
            if not ok:
                break  # the later steps build on this one
    finally:
        if service and service.poll() is None:
            service.send_signal(signal.SIGKILL)
            service.wait()
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
