#!/usr/bin/env bash
# Where a mimalloc service's RSS stays after the burst (docs/PACKAGE.md,
# "What stays under mimalloc"). One fresh python/tests/grpc_service.py under
# mimalloc (preloaded), RSSLAB_RESIDUE_WORKERS workers (64), as
# bench/service_fix.sh's (e) (the package with auto_trim("after_burst")) or
# (m) (RSSLAB_RESIDUE_CONDITION=m: nothing), through the same burst (fill +
# shrink at RSSLAB_FIX_SCALE, then 65 s idle). Right after start and at the
# end it reads, from outside: /proc/PID/smaps (file-backed, [heap], [stack],
# other anonymous), mimalloc's committed bytes and, for (e), each pool
# worker's heap after the automatic release (rsslab_ctl snapshot --json:
# last_trim: committed, live and resident bytes, all and in pages of blocks
# under 8 KiB), and pymalloc's arenas (sys._debugmallocstats() on SIGUSR1).
# RSSLAB_RESIDUE_COLLECT_SERVING=1 also collects, every 5 s, the heaps of
# grpcio's serving threads (grpc_service.py --collect_serving_s): a
# diagnostic of where the rest stays, not one of the package's releases.
#   RSSLAB_FIX_PYTHON=venv/bin/python bench/service_residue.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
PY=${RSSLAB_FIX_PYTHON:-/usr/bin/python3}   # with the rsslab wheel installed
WORKERS=${RSSLAB_RESIDUE_WORKERS:-64}
CONDITION=${RSSLAB_RESIDUE_CONDITION:-e}
COLLECT_SERVING=${RSSLAB_RESIDUE_COLLECT_SERVING:-0}
SCALE=${RSSLAB_FIX_SCALE:-1}
OUT=${RSSLAB_RESIDUE_OUT:-$ROOT/results/service_residue-$(date -u +%Y%m%dT%H%M%SZ)}
LG=$(find_bin rsslab_loadgen loadgen) || exit 2
CTL=$(find_bin rsslab_ctl ctl) || exit 2
case $CONDITION in e|m) ;; *) echo "service_residue.sh: RSSLAB_RESIDUE_CONDITION must be e or m, got '$CONDITION'" >&2; exit 2 ;; esac
case $COLLECT_SERVING in 0|1) ;; *) echo "service_residue.sh: RSSLAB_RESIDUE_COLLECT_SERVING must be 0 or 1, got '$COLLECT_SERVING'" >&2; exit 2 ;; esac
case $WORKERS in ''|*[!0-9]*) echo "service_residue.sh: RSSLAB_RESIDUE_WORKERS must be a whole number, got '$WORKERS'" >&2; exit 2 ;; esac
[ "$WORKERS" -ge 1 ] && [ "$WORKERS" -le 256 ] || { echo "service_residue.sh: RSSLAB_RESIDUE_WORKERS must be 1..256, got $WORKERS" >&2; exit 2; }
"$PY" -c "import rsslab" || { echo "service_residue.sh: $PY cannot import rsslab (./rsslab wheel; pip install dist/rsslab-*.whl)" >&2; exit 2; }
[ -x "$LG" ] && [ -x "$CTL" ] || { echo "service_residue.sh: build //loadgen:rsslab_loadgen //ctl:rsslab_ctl first" >&2; exit 2; }
mkdir -p "$OUT"
write_burst_scenario "$OUT/burst.textproto" "$SCALE" service_residue
exec /usr/bin/python3 - "$ROOT" "$PY" "$LG" "$CTL" "$OUT" "$WORKERS" "$CONDITION" "$COLLECT_SERVING" <<'PYEOF'
import json, os, re, signal, subprocess, sys, time
root, py, lg, ctl, out, workers, cond, collect_serving = sys.argv[1:9]
mib = 1 << 20
env = {k: v for k, v in os.environ.items()
       if k != "LD_PRELOAD" and not k.startswith(("MALLOC_", "MIMALLOC_"))}
env["LD_PRELOAD"] = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
err_path = os.path.join(out, "service.err")
err = open(err_path, "w+")
flags = ["--auto_trim=after_burst"] if cond == "e" else ["--no_package"]
if collect_serving == "1":
    flags.append("--collect_serving_s=5")
p = subprocess.Popen([py, os.path.join(root, "python/tests/grpc_service.py"),
                      "--workers=" + workers,
                      "--handler=" + os.path.join(root, "server/handlers/web_worker.py"),
                      "--peer_dir=" + os.path.join(root, "bench/peer")] + flags,
                     env=env, stdout=subprocess.PIPE, stderr=err, text=True)
p.stdout.readline()
ready = p.stdout.readline()
if not ready.startswith("rsslab_server ready"):
    sys.exit("service_residue.sh: the service did not start (%s)" % err_path)
fields = dict(f.split("=", 1) for f in ready.split() if "=" in f)

def smaps(pid):
    parts = {"file-backed": 0, "[heap]": 0, "[stack]": 0, "other anonymous": 0}
    name = None
    for line in open("/proc/%d/smaps" % pid):
        f = line.split()
        if re.match(r"^[0-9a-f]+-[0-9a-f]+$", f[0]):
            path = f[5] if len(f) > 5 else ""
            name = ("file-backed" if path.startswith("/") else
                    path if path in ("[heap]", "[stack]") else "other anonymous")
        elif f[0] == "Rss:":
            parts[name] += int(f[1]) * 1024
    return parts

def pymalloc(pid):
    # sys._debugmallocstats() writes to the service's stderr.
    err.seek(0, 2)
    start = err.tell()
    os.kill(pid, signal.SIGUSR1)
    text = ""
    for _ in range(100):
        time.sleep(0.1)
        err.seek(start)
        text = err.read()
        if "Total" in text and "bytes/arena" in text:
            break
    arenas = re.search(r"(\d+) arenas \* (\d+) bytes/arena", text.replace(",", ""))
    used = re.search(r"# bytes in allocated blocks\s*=\s*([\d,]+)", text)
    return (int(arenas.group(1)) * int(arenas.group(2)) if arenas else -1,
            int(used.group(1).replace(",", "")) if used else -1)

def snapshot():
    r = subprocess.run([ctl, "--control=" + fields["control"], "snapshot", "--json"],
                       capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else {}

def look(pid):
    s = snapshot()
    rss = int(open("/proc/%d/statm" % pid).read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return {"rss": rss, "smaps": smaps(pid), "pymalloc": pymalloc(pid),
            "commit": int(s.get("allocator_stats", {}).get("mimalloc", {}).get("current_commit", -1)),
            "trim": s.get("last_trim", {}),
            "threads": len(os.listdir("/proc/%d/task" % pid))}

time.sleep(1)
fresh = look(p.pid)
load0 = open("/proc/loadavg").read().split()[0]
r = subprocess.run([lg, "--scenario=" + os.path.join(out, "burst.textproto"), "--target=" + fields["data"],
                    "--control=" + fields["control"], "--out=" + os.path.join(out, "run")],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
if r.returncode != 0:
    p.terminate()
    sys.exit("service_residue.sh: the loadgen failed: %s" % (r.stderr.strip().splitlines() or [""])[-1])
end = look(p.pid)
json.dump(end, open(os.path.join(out, "end.json"), "w"), indent=1, default=str)
p.terminate()
p.wait(10)
workers_after = [w for w in end["trim"].get("workers", []) if w.get("ran")]
heap_c = sum(int(w.get("after", {}).get("heap_committed_bytes", 0)) for w in workers_after)
heap_u = sum(int(w.get("after", {}).get("heap_used_bytes", 0)) for w in workers_after)
def heap_sum(key):  # -1 when a worker's figure is missing (an older package)
    v = [int(w.get("after", {}).get(key, -1)) for w in workers_after]
    return sum(v) if v and min(v) >= 0 else -1
heap_r = heap_sum("heap_resident_bytes")
small_r = heap_sum("heap_small_block_resident_bytes")
small_u = heap_sum("heap_small_block_used_bytes")
rows = [("RSS", fresh["rss"], end["rss"])]
rows += [(k, fresh["smaps"][k], end["smaps"][k]) for k in fresh["smaps"]]
rows += [("pymalloc arenas (mapped)", fresh["pymalloc"][0], end["pymalloc"][0]),
         ("pymalloc blocks in use", fresh["pymalloc"][1], end["pymalloc"][1]),
         ("mimalloc committed (process)", fresh["commit"], end["commit"])]
lines = ["# condition (%s)%s, %s workers, scale %s; load average at start %s; threads %d -> %d"
         % (cond, ", serving threads collected every 5 s" if collect_serving == "1" else "",
            workers, os.environ.get("RSSLAB_FIX_SCALE", "1"), load0, fresh["threads"], end["threads"]),
         "| | fresh | 65 s after the burst | added |", "|---|---|---|---|"]
for name, a, b in rows:
    lines.append("| %s | %.1f MiB | %.1f MiB | %+.1f MiB |" % (name, a / mib, b / mib, (b - a) / mib))
if workers_after:
    lines.append("| the %d pool workers' heaps after the automatic release: committed / live | | %.1f / %.1f MiB | |"
                 % (len(workers_after), heap_c / mib, heap_u / mib))
    if heap_r >= 0:
        lines.append("| of the pool workers' heaps: resident / live | | %.1f / %.1f MiB | |"
                     % (heap_r / mib, heap_u / mib))
        lines.append("| of it in pages of blocks under 8 KiB: resident / live | | %.1f / %.1f MiB | |"
                     % (small_r / mib, small_u / mib))
open(os.path.join(out, "residue.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PYEOF
