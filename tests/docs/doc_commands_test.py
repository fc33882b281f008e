#!/usr/bin/python3
"""A page's commands, run as written: doc_commands_test.py DOC [SECTION].

Every command of the page's ```sh blocks (of SECTION only, a "## " heading,
when given) runs in order with bash, from a directory laid out as the
repository is after `./rsslab build` (bin/, agent/profiles.textproto, the
shop service of tests/anysvc, the `rsslab` script), so the page cannot drift
from what the tools do. What is substituted, and nothing else:

- every loopback port the commands name (127.0.0.1:N, and the page's extra
  ports below) by a free one, the same one throughout;
- PID by the pid of the last process started with `&` (from its ready line),
  and `kill %N` by the pid of job N (what `&` started, as bash numbers jobs);
- venv/bin/python by /usr/bin/python3 with the package as Bazel built it;
- a command whose comment says `tested with --flag=V ...` runs with those
  flags instead of its own (or added): the page says so where it shortens.

A command ending in `&` is started and waited for up to its ready line (a
line "NAME ready ..."); `kill PID` waits for that process to exit 0. Each
other command must exit 0 (or the status its comment gives as
`exit status N`) and print every "..." of its `# shows:` comment.

Two hosts: a page whose blocks start with `# on host A` or `# on host B`
runs them in two network namespaces joined by a veth pair, host A at
10.0.0.1 and host B at 10.0.0.2, as the page names them (needs root and
`ip netns`; skipped, saying why, otherwise). The namespaces are deleted
whatever happens, after their processes are stopped.
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
sys.path.insert(0, os.path.join(WS, "python/tests"))
import package_tree  # noqa: E402
from package_tree import check, failures  # noqa: E402

# What each page must keep: each of these in some command that has a
# # shows:; and ports its commands name without 127.0.0.1: in front.
PAGES = {
    "docs/WALKTHROUGH.md": {
        "required": ["bin/rsslab_ctl inspect --pid=PID", "--call=shop.v1.Cart/Add",
                     "--call=shop.v1.Cart/Chat", "rsslab.serve(server=server)", " snapshot",
                     " trim", "--builtin=sweep --local", "--profiles=glibc-arena2,jemalloc"],
        "ports": [50070],
    },
    "docs/WALKTHROUGH-HTTP.md": {
        "required": ["--builtin=sweep --local", "--control=all:gunicorn",
                     "glibc,glibc-arena2,jemalloc,tcmalloc,pymalloc-off",
                     "## Service processes after idle"]},
    "README.md": {"required": ["bin/rsslab_loadgen --builtin=seed", " snapshot", "inspect PID"]},
    "docs/start/LAB.md": {"required": ["--builtin=seed", "--builtin=sweep", "--builtin=soak"]},
    "docs/start/SERVICE.md": {
        "required": ["bin/rsslab_ctl inspect PID", "--builtin=sweep --local", " compare "],
        "ports": [50070],
    },
    "docs/start/OPERATOR.md": {
        "required": ["bin/rsslab_agent ", "bin/rsslab_agent_ctl", "/metrics", "--print_cells"]},
    "docs/start/TWO-HOSTS.md": {"required": ["--auth_token_file", "bin/rsslab_ctl"]},
}
HOSTS = {"A": "10.0.0.1", "B": "10.0.0.2"}
READY = re.compile(r"^[\w.-]+ ready ")



def failure_excerpt(out):
    """What a failed command said: its lines naming a failure or an error
    (wherever they are in a long output), then its last 2000 characters."""
    flagged = [l for l in out.splitlines()
               if re.search(r"\b(fail(ed|s)?|error|FAIL)\b", l) and " 0 failed" not in l]
    head = "\n".join(flagged[:20])
    return (head + "\n...\n" if head else "") + out[-2000:]

def doc_commands(text):
    """The ```sh blocks' commands in order, each with the host its block
    names ("" for none): continuation lines joined, a heredoc kept with its
    body, blank lines dropped."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        lines = block.splitlines()
        host = ""
        on = re.match(r"#\s*on host ([AB])\b", lines[0]) if lines else None
        if on:
            host, lines = on.group(1), lines[1:]
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
                commands.append((host, cmd))
    return commands


def section(text, heading):
    start = text.index("\n" + heading + "\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def comment(cmd):
    """The `#` comment of a command's first or last line."""
    for line in (cmd.split("\n", 1)[0], cmd.rsplit("\n", 1)[-1]):
        found = re.search(r"\s#\s(.*)$", line)
        if found:
            return found.group(1)
    return ""


def shows(cmd):
    """The "..." texts of a command's `# shows:` comment."""
    found = re.search(r"shows:(.*)$", comment(cmd))
    return re.findall(r'"([^"]*)"', found.group(1)) if found else []


def expected_status(cmd):
    found = re.search(r"exit status (\d+)", comment(cmd))
    return int(found.group(1)) if found else 0


def shortened(cmd):
    """The command with the flags of its `tested with --a=1 --b=2` applied."""
    found = re.search(r"tested with ((?:--\w+=[^\s;,)]+\s*)+)", comment(cmd))
    if not found:
        return cmd
    lines = cmd.split("\n")
    for flag in found.group(1).split():
        name = flag.split("=", 1)[0]
        code = [l.split("  #", 1) for l in lines]
        if any(re.search(r"(^|\s)%s=\S+" % name, c[0]) for c in code):
            lines = [re.sub(r"(^|\s)%s=\S+" % name, lambda m: m.group(1) + flag, c[0])
                     + ("  #" + c[1] if len(c) > 1 else "") for c in code]
        else:
            last = lines[-1].split("  #", 1)
            lines[-1] = last[0].rstrip() + " " + flag + ("  #" + last[1] if len(last) > 1 else "")
    return "\n".join(lines)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def layout():
    """TMP/repo: what the page's relative paths name in a built checkout."""
    repo = os.path.join(TMP, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    for d in ("bin", "tests/anysvc", "agent", "venv/bin", "tools", "server"):
        os.makedirs(os.path.join(repo, d))
    os.symlink(os.path.join(WS, "server/handlers"), os.path.join(repo, "server/handlers"))
    for b in ("loadgen/rsslab_loadgen", "ctl/rsslab_ctl", "server/rsslab_server",
              "agent/rsslab_agent", "agent/rsslab_agent_ctl", "agent/rsslab_run"):
        os.symlink(os.path.join(WS, b), os.path.join(repo, "bin", os.path.basename(b)))
    for f in ("tests/anysvc/shop_service.py", "tests/anysvc/shop.proto", "agent/profiles.textproto",
              "rsslab", "tools/serve.sh"):
        shutil.copy(os.path.join(WS, f), os.path.join(repo, f))
    python = os.path.join(repo, "venv/bin/python")
    with open(python, "w") as f:
        f.write('#!/bin/sh\nPYTHONPATH=%s exec /usr/bin/python3 "$@"\n' % package_tree.make(WS, TMP))
    os.chmod(python, 0o755)
    return repo


class Namespaces:
    """Hosts A and B: two network namespaces and a veth pair."""

    def __init__(self):
        self.ns = {h: "rsslab-doc%s-%d" % (h.lower(), os.getpid()) for h in HOSTS}
        self.made = []

    def ip(self, *args):
        r = subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError("ip %s: %s" % (" ".join(args), r.stderr.strip()))

    def create(self):
        for h in HOSTS:
            self.ip("netns", "add", self.ns[h])
            self.made.append(self.ns[h])
        veth = {h: "rsd%s%d" % (h.lower(), os.getpid() % 100000) for h in HOSTS}
        self.ip("link", "add", veth["A"], "netns", self.ns["A"], "type", "veth", "peer", "name",
                veth["B"], "netns", self.ns["B"])
        for h, addr in HOSTS.items():
            self.ip("-n", self.ns[h], "addr", "add", addr + "/24", "dev", veth[h])
            self.ip("-n", self.ns[h], "link", "set", "lo", "up")
            self.ip("-n", self.ns[h], "link", "set", veth[h], "up")

    def argv(self, host, cmd):
        if not host:
            return ["bash", "-c", cmd]
        return ["ip", "netns", "exec", self.ns[host], "bash", "-c", cmd]

    def delete(self):
        for ns in self.made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def start(argv, repo, env):
    """A `... &` command: started, its output read up to the ready line."""
    err = os.path.join(TMP, "background-%d.err" % time.monotonic_ns())
    proc = subprocess.Popen(argv, cwd=repo, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=open(err, "w"))
    out, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline:
        got = proc.stdout.readline()
        if not got:
            break
        out += got
        if READY.match(got):
            break
    pid = re.search(r"\bpid=(\d+)", out)
    if not pid:  # what it said before it failed
        time.sleep(0.2)
        out += open(err).read()
    return proc, (pid.group(1) if pid else ""), out


def run(doc, heading, hosts_needed):
    conf = PAGES[doc]
    text = open(os.path.join(WS, doc)).read()
    commands = doc_commands(section(text, heading) if heading else text)
    check(len(commands) >= 3, "%s: %d commands in its sh blocks" % (doc, len(commands)))
    for want in conf["required"]:
        check(any(want in c and shows(c) for _, c in commands),
              "%s runs %r with a # shows:" % (doc, want))
    repo = layout()
    # The package's address files go to $XDG_RUNTIME_DIR, else /tmp; a test's
    # own directory keeps them apart from another sandbox's, whose workers
    # can have the same pids (each sandbox has its own pid namespace).
    run = os.path.join(TMP, "xdg-run")
    os.makedirs(run, mode=0o700, exist_ok=True)
    env = dict(os.environ, RSSLAB_HOME=WS, XDG_RUNTIME_DIR=run)
    ports = set(conf.get("ports", []))
    for _, c in commands:
        ports.update(int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", c) if p != "0")
    free = {p: free_port() for p in ports}
    ns = Namespaces()
    if hosts_needed:
        ns.create()
    jobs = {}  # job number -> (Popen, pid from its ready line)
    last_pid = ""
    t_all = time.monotonic()
    try:
        for host, cmd in commands:
            for p, q in free.items():
                cmd = re.sub(r"\b%d\b" % p, q, cmd)
            cmd = re.sub(r"\bPID\b", last_pid, cmd)
            cmd = re.sub(r"kill %(\d+)", lambda m: "kill " + (
                str(jobs[int(m.group(1))][0].pid) if int(m.group(1)) in jobs else "%" + m.group(1)),
                cmd)
            cmd = shortened(cmd)
            first = ("[%s] " % host if host else "") + cmd.split("\n", 1)[0][:110]
            t0 = time.monotonic()
            code_part = cmd.rsplit("\n", 1)[-1].split("  #", 1)[0].strip()
            if code_part.endswith("&"):
                line = cmd.split("  #", 1)[0].strip()[:-1]
                proc, pid, out = start(ns.argv(host, "exec " + line), repo, env)
                number = max(jobs, default=0) + 1
                jobs[number] = (proc, pid or str(proc.pid))
                last_pid = pid
                ok = bool(pid)
            else:
                r = subprocess.run(ns.argv(host, cmd), cwd=repo, env=env, capture_output=True,
                                   text=True, timeout=180)
                out = r.stdout + r.stderr
                ok = r.returncode == expected_status(cmd)
                killed = re.match(r"kill (\d+)", cmd)
                if killed:
                    for number, (proc, pid) in list(jobs.items()):
                        if killed.group(1) in (pid, str(proc.pid)):
                            try:
                                ok = ok and proc.wait(timeout=20) == 0
                            except subprocess.TimeoutExpired:
                                ok = False
                            del jobs[number]
            missing = [s for s in shows(cmd) if s not in out]
            check(ok and not missing,
                  "%s (%.1f s)%s%s" % (first, time.monotonic() - t0,
                                       "" if ok else ": failed",
                                       " missing %r" % missing if missing else "")
                  + ("" if ok and not missing else "\n" + failure_excerpt(out)))
            if not ok:
                break  # the later steps build on this one
    finally:
        for proc, _ in jobs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
        ns.delete()
    print("%s: %.1f s" % (doc, time.monotonic() - t_all))


def main():
    doc = sys.argv[1]
    heading = sys.argv[2] if len(sys.argv) > 2 else ""
    text = open(os.path.join(WS, doc)).read()
    hosts_needed = bool(re.search(r"```sh\n#\s*on host [AB]\b", text))
    if hosts_needed and os.geteuid() != 0:
        print("skipped: %s runs on two hosts, as network namespaces: needs root" % doc)
        return
    run(doc, heading, hosts_needed)
    if failures:
        print("%d check(s) failed" % len(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
