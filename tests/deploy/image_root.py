"""An /opt/rsslab tree like the image's, built from this test's runfiles.

deploy/k8s/Dockerfile installs bin/rsslab_loadgen, bin/rsslab_server,
agent/profiles.textproto, server/handlers,
loadgen/results/plots_and_advice.py, tools/setup/mimalloc3.env and
.deps/mimalloc3 under /opt/rsslab (DEST_DIRS: k8s_sim_test checks them
against the Dockerfile's cp lines). The batch tests lay out the same tree
under a temporary root and
run the shipped commands with their absolute paths moved under that root
(reroot), so the command that runs is the one in the manifest or script.
"""

import os
import shutil
import subprocess

WORKSPACE = os.path.join(os.environ.get("TEST_SRCDIR", ""), "rsslab")


def runfile(rel):
    return os.path.join(WORKSPACE, rel)


# Every directory the Dockerfile copies into, relative to /opt/rsslab.
DEST_DIRS = ["bin", "agent", "server", "loadgen/results", "tools/setup", ".deps"]


def make(root):
    """Creates ROOT/opt/rsslab as the image has it; returns its bin/."""
    opt = os.path.join(root, "opt", "rsslab")
    os.makedirs(os.path.join(opt, "bin"), exist_ok=True)
    os.makedirs(os.path.join(opt, "agent"), exist_ok=True)
    os.makedirs(os.path.join(opt, "loadgen", "results"), exist_ok=True)
    # Copies, not links: the binaries find profiles and handlers beside
    # their own real path, as in the image.
    for b in ("loadgen/rsslab_loadgen", "server/rsslab_server"):
        shutil.copy(runfile(b), os.path.join(opt, "bin"))
    shutil.copy(runfile("agent/profiles.textproto"), os.path.join(opt, "agent"))
    shutil.copy(runfile("loadgen/results/plots_and_advice.py"), os.path.join(opt, "loadgen", "results"))
    handlers = os.path.dirname(os.path.realpath(runfile("server/handlers/web_worker.py")))
    shutil.copytree(handlers, os.path.join(opt, "server", "handlers"), dirs_exist_ok=True)
    # mimalloc 3 as ./rsslab setup unpacked it, and the file that names it.
    os.makedirs(os.path.join(opt, "tools", "setup"), exist_ok=True)
    shutil.copy(runfile("tools/setup/mimalloc3.env"), os.path.join(opt, "tools", "setup"))
    env = dict(line.strip().split("=", 1) for line in open(runfile("tools/setup/mimalloc3.env"))
               if "=" in line and not line.startswith("#"))
    lib = runfile(env["MIMALLOC3_LIB"])
    if os.path.exists(lib):
        dest = os.path.join(opt, env["MIMALLOC3_LIB"])
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy(os.path.realpath(lib), dest)
    return os.path.join(opt, "bin")


def reroot(args, root, prefixes):
    """Each absolute path under one of `prefixes` (alone or after '=')
    moved under root."""
    out = []
    for a in args:
        head, eq, val = a.partition("=") if a.startswith("--") else ("", "", a)
        if a.startswith("--") and not eq:
            out.append(a)
            continue
        for p in prefixes:
            if val == p or val.startswith(p + "/"):
                val = root + val
                break
        out.append(head + eq + val if eq else val)
    return out


def run(args, env=None, timeout=120):
    r = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def csv_rows(path):
    with open(path) as f:
        return [line.rstrip("\n").split(",") for line in f if line.strip()]


def check_complete_merge(merged, cells, tools_report):
    """The merged run directory holds a complete table with every cell: the
    same CSV columns as a one-machine sweep, cells.json with every cell, no
    cell missing, no value missing."""
    import json
    rows = csv_rows(os.path.join(merged, "summary.csv"))
    assert rows[0][:4] == ["profile", "threads", "cells", "ok_cells"], rows[0]
    assert rows[0][4] == "under_load_mib_median", rows[0]
    assert sum(int(r[3]) for r in rows[1:]) == cells, rows
    for r in rows[1:]:
        assert r[2] == r[3], "a row with failed cells: %s" % r
        assert "-" not in r, "a value missing: %s" % r
    md = open(os.path.join(merged, "summary.md")).read()
    assert "INCOMPLETE" not in md, md[:2000]
    assert "Status: **completed**" in md, md[:2000]
    assert "## What to do" in md, "plots_and_advice.py did not run on the merge"
    results = []
    with open(os.path.join(merged, "events.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if "cell_result" in e:
                results.append(e)
    indices = sorted({e.get("cell_index", 0) for e in results if e["cell_result"].get("ok")})
    assert indices == list(range(cells)), indices
    for e in results:
        host = e["cell_result"].get("host", {})
        assert host.get("hostname") and host.get("kernel") and host.get("cpus"), e
    # The aggregate as data beside the table: every cell, and plots_and_advice.py
    # (which only reads it) runs again on it.
    table = json.load(open(os.path.join(merged, "cells.json")))
    assert len(table["cells"]) == cells and table["complete"], table.get("incomplete_line")
    assert len(table["rows"]) == len(rows) - 1, (len(table["rows"]), len(rows))
    code, _, err = run(["/usr/bin/python3", tools_report, merged, "--no-plots"])
    assert code == 0, err
    return results
