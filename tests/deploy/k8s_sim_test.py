#!/usr/bin/python3
"""The Kubernetes deployment without a cluster (none can run here).

Parses deploy/k8s/*.yaml with python3-yaml and checks what a cluster would
be given: the sweep is an Indexed Job with one completion per cell of its
ConfigMap's matrix, configurable parallelism, Guaranteed QoS (requests =
limits) for every container, results on a volume, and every pod's command
exactly the cell command; the merge is a second Job over the same volume.
Then runs the sweep pod's command for every index on this machine, with
JOB_COMPLETION_INDEX set as the Job controller sets it and the image's
paths under a temporary root, runs the merge Job's command, and checks the
merged table is complete.
"""

import glob
import json
import os
import re
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_root  # noqa: E402

# The cell command (docs/DEPLOY.md): the scenario from the ConfigMap, the
# server launched and verified in the pod, the cell from the Job's index,
# a run directory per cell on the results volume (a retried pod resumes it).
CELL_COMMAND = [
    "/opt/rsslab/bin/rsslab_loadgen",
    "--scenario=/config/sweep.txtpb",
    "--local",
    "--cell_index_env=JOB_COMPLETION_INDEX",
    "--results_dir=/results/cells",
    "--progress=lines",
]
MERGE_COMMAND = ["/opt/rsslab/bin/rsslab_loadgen", "merge", "--out=/results/merged",
                 "/results/cells"]
PREFIXES = ["/opt/rsslab", "/config", "/results"]


def load_manifests():
    docs = []
    for path in sorted(glob.glob(image_root.runfile("deploy/k8s/*.yaml"))):
        with open(path) as f:
            docs += [(os.path.basename(path), d) for d in yaml.safe_load_all(f) if d]
    assert docs, "no manifest in deploy/k8s"
    return docs


def check_guaranteed(name, pod_spec):
    for c in pod_spec["containers"]:
        res = c.get("resources", {})
        req, lim = res.get("requests"), res.get("limits")
        assert req and lim and req == lim, "%s/%s: requests must equal limits" % (name, c["name"])
        assert set(req) >= {"cpu", "memory"}, "%s/%s: cpu and memory" % (name, c["name"])


def mounts(pod_spec, container):
    vols = {v["name"]: v for v in pod_spec.get("volumes", [])}
    return {m["mountPath"]: vols[m["name"]] for m in container.get("volumeMounts", [])}


def main():
    tmp = os.environ["TEST_TMPDIR"]
    docs = load_manifests()
    jobs = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "Job"}
    maps = {d["metadata"]["name"]: d for _, d in docs if d["kind"] == "ConfigMap"}
    claims = {d["metadata"]["name"] for _, d in docs if d["kind"] == "PersistentVolumeClaim"}
    sweep, merge = jobs["rsslab-sweep"], jobs["rsslab-merge"]

    spec = sweep["spec"]
    assert spec["completionMode"] == "Indexed", spec
    assert isinstance(spec.get("parallelism"), int) and spec["parallelism"] >= 1, spec
    pod = spec["template"]["spec"]
    check_guaranteed("rsslab-sweep", pod)
    check_guaranteed("rsslab-merge", merge["spec"]["template"]["spec"])
    for c in pod["containers"]:
        assert c["command"] == CELL_COMMAND, "pod command %s is not the cell command %s" % (
            c["command"], CELL_COMMAND)
        assert "args" not in c, "the whole command is in `command`"
        m = mounts(pod, c)
        assert m["/results"]["persistentVolumeClaim"]["claimName"] in claims, m
        scenario_map = maps[m["/config"]["configMap"]["name"]]
    mc = merge["spec"]["template"]["spec"]["containers"][0]
    assert mc["command"] == MERGE_COMMAND, mc["command"]
    assert (mounts(merge["spec"]["template"]["spec"], mc)["/results"] ==
            mounts(pod, pod["containers"][0])["/results"]), "merge reads the cells' volume"

    root = os.path.join(tmp, "root")
    image_root.make(root)
    os.makedirs(root + "/config")
    os.makedirs(root + "/results")
    for key, text in scenario_map["data"].items():
        with open(os.path.join(root, "config", key), "w") as f:
            f.write(text)
    cell_cmd = image_root.reroot(CELL_COMMAND, root, PREFIXES)

    # completions = the matrix's cells.
    code, out, err = image_root.run(cell_cmd[:2] + ["--print_cells", "--json"])
    assert code == 0, err
    total = json.loads(out)["cells_total"]
    assert spec["completions"] == total, "completions %d, the matrix has %d cells" % (
        spec["completions"], total)

    # A pod killed outright (SIGKILL) mid-cell: its records stay, and the
    # retried pod (the same command) resumes that directory in place.
    cells_dir = root + "/results/cells"
    env = dict(os.environ, JOB_COMPLETION_INDEX="0")
    p = subprocess.Popen(cell_cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed_dir = None
    end = time.time() + 60
    while time.time() < end and killed_dir is None:
        for d in os.listdir(cells_dir) if os.path.isdir(cells_dir) else []:
            events = os.path.join(cells_dir, d, "events.jsonl")
            # A step record of the cell (the header's scenario has steps too).
            if os.path.exists(events) and '"step":{"step"' in open(events).read():
                killed_dir = d
        time.sleep(0.02)  # polling a file another process writes
    p.kill()
    p.wait()
    assert killed_dir, "the cell never began"
    assert '"cell_result"' not in open(os.path.join(cells_dir, killed_dir, "events.jsonl")).read()

    for i in range(spec["completions"]):
        env = dict(os.environ, JOB_COMPLETION_INDEX=str(i))
        code, out, err = image_root.run(cell_cmd, env=env)
        assert code == 0, "index %d: exit %d\n%s\n%s" % (i, code, out, err[-3000:])
        if i == 0:
            assert "resuming " in err and killed_dir in err, err
        print("index %d: %s" % (i, out.strip().splitlines()[-1]))
    # One directory per cell; a pod run again for a cell already done runs nothing.
    assert len(os.listdir(cells_dir)) == total, os.listdir(cells_dir)
    code, out, err = image_root.run(cell_cmd, env=dict(os.environ, JOB_COMPLETION_INDEX="1"))
    assert code == 0 and "nothing to run" in err, (code, err)
    assert len(os.listdir(cells_dir)) == total, os.listdir(cells_dir)

    # A partial merge first: INCOMPLETE, the missing indices named.
    some = sorted(os.listdir(cells_dir))[:2]
    code, out, err = image_root.run(
        image_root.reroot(["/opt/rsslab/bin/rsslab_loadgen", "merge", "--out=/results/partial"],
                          root, PREFIXES) + [os.path.join(cells_dir, d) for d in some])
    assert code == 1, (code, out, err)
    assert "INCOMPLETE (2 of 4 cells); no record of cell(s) 2-3" in out, out

    # Another matrix is refused, naming what differs.
    other = root + "/config/other.txtpb"
    with open(other, "w") as f:
        f.write(open(root + "/config/sweep.txtpb").read().replace("threads: [1, 2]",
                                                                  "threads: [1, 4]"))
    odd = [a if not a.startswith("--scenario=") else "--scenario=" + other for a in cell_cmd]
    odd = [a if not a.startswith("--results_dir=") else "--results_dir=" + root + "/other"
           for a in odd]
    code, out, err = image_root.run(odd, env=dict(os.environ, JOB_COMPLETION_INDEX="0"))
    assert code == 0, err
    code, out, err = image_root.run(
        image_root.reroot(["/opt/rsslab/bin/rsslab_loadgen", "merge", "--out=/results/odd"],
                          root, PREFIXES) + [cells_dir, root + "/other"])
    assert code == 2, (code, out, err)
    assert "ran another matrix" in err and "the thread counts differ: [1,2] vs [1,4]" in err, err
    assert len(err.strip().splitlines()) == 1, err

    merge_cmd = image_root.reroot(MERGE_COMMAND, root, PREFIXES)
    for _ in range(2):  # idempotent: the second run rebuilds the same result
        code, out, err = image_root.run(merge_cmd)
        assert code == 0, "merge: exit %d\n%s\n%s" % (code, out, err)
    print(out)
    results = image_root.check_complete_merge(root + "/results/merged", total,
                                              image_root.runfile("loadgen/results/plots_and_advice.py"))
    # Cell 0: the killed attempt (kept, does not count), then the resumed one.
    cell0 = [e for e in results if e.get("cell_index", 0) == 0]
    assert len(cell0) == 2, cell0
    assert not cell0[0]["cell_result"].get("ok") and cell0[1]["cell_result"]["ok"], cell0
    assert killed_dir in cell0[0]["cell_result"]["error"], cell0[0]
    assert "its records stop after step" in cell0[0]["cell_result"]["error"], cell0[0]
    md = open(root + "/results/merged/summary.md").read()
    assert "glibc/t1/r1 attempt 1: failed: no result in" in md, md
    check_mimalloc3_in_image(root, cell_cmd)
    print("PASS")


def check_mimalloc3_in_image(root, cell_cmd):
    """The image carries what the mimalloc3 profiles preload: the
    Dockerfile copies into exactly the directories image_root lays out, and
    a mimalloc3 cell runs there with the library mapped."""
    dockerfile = open(image_root.runfile("deploy/k8s/Dockerfile")).read()
    dests = set()
    for m in re.finditer(r"\bcp (?:-r )?\S+ /opt/rsslab/(\S*?)/?(?:;|\s|$)", dockerfile):
        dests.add(m.group(1))
    assert dests == set(image_root.DEST_DIRS), (sorted(dests), image_root.DEST_DIRS)
    if not os.path.exists(os.path.join(root, "opt/rsslab/.deps")) or not glob.glob(
            os.path.join(root, "opt/rsslab/.deps/**/libmimalloc.so.3"), recursive=True):
        raise AssertionError("no mimalloc 3 in the image tree (./rsslab setup fetches it)")
    cmd = [a if not a.startswith("--results_dir=") else "--results_dir=" + root + "/m3"
           for a in cell_cmd] + ["--profiles=mimalloc3", "--threads_list=1"]
    code, out, err = image_root.run(cmd, env=dict(os.environ, JOB_COMPLETION_INDEX="0"))
    assert code == 0, "the mimalloc3 cell in the image tree: exit %d\n%s" % (code, err[-3000:])
    events = glob.glob(root + "/m3/*/events.jsonl")
    assert len(events) == 1, events
    text = open(events[0]).read()
    assert '"cell_result"' in text and "libmimalloc.so.3" in text, text[-2000:]


if __name__ == "__main__":
    main()
