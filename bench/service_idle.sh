#!/usr/bin/env bash
# The idle overhead: what the rsslab package adds to an idle grpcio
# service. Four fresh processes of python/tests/grpc_service.py side by
# side (16 workers, glibc): --bare (no rsslab import at all), the package as
# docs/PACKAGE.md adds it (track, interceptor, auto_trim("after_burst"),
# serve() with /metrics: the grpcio transport, since grpc is imported), the
# same with serve(transport="native") (the package's own gRPC C++ server),
# and the same without serve() (no Control service). Each serves 2,000 seed requests, then all idle
# for RSSLAB_IDLE_S seconds (600) while their own RSS (/proc/PID/statm)
# and CPU time (/proc/PID/stat utime+stime) are sampled every 10 s. Both
# read only their own counters, so the figure does not depend on the load
# of the machine (it is printed); run it niced, beside other work:
#   RSSLAB_FIX_PYTHON=venv/bin/python nice -n 10 bench/service_idle.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
PY=${RSSLAB_FIX_PYTHON:-/usr/bin/python3}   # with the rsslab wheel installed
IDLE_S=${RSSLAB_IDLE_S:-600}
OUT=${RSSLAB_IDLE_OUT:-$ROOT/results/service_idle-$(date -u +%Y%m%dT%H%M%SZ)}
LG=$(find_bin rsslab_loadgen loadgen) || exit 2
"$PY" -c "import rsslab" || { echo "service_idle.sh: $PY cannot import rsslab (./rsslab wheel; pip install dist/rsslab-*.whl)" >&2; exit 2; }
mkdir -p "$OUT"
exec /usr/bin/python3 - "$ROOT" "$PY" "$LG" "$OUT" "$IDLE_S" <<'PYEOF'
import os, subprocess, sys, time
root, py, lg, out, idle_s = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
tick = os.sysconf("SC_CLK_TCK"); page = os.sysconf("SC_PAGE_SIZE")
env = {k: v for k, v in os.environ.items()
       if k != "LD_PRELOAD" and not k.startswith(("MALLOC_", "MIMALLOC_"))}
base = [py, os.path.join(root, "python/tests/grpc_service.py"), "--workers=16",
        "--handler=" + os.path.join(root, "server/handlers/web_worker.py"),
        "--peer_dir=" + os.path.join(root, "bench/peer")]
svcs = {}
for name, flags in (("bare", ["--bare"]), ("package", ["--auto_trim=after_burst", "--metrics"]),
                    ("package_native", ["--auto_trim=after_burst", "--metrics",
                                        "--serve_transport=native"]),
                    ("package_no_serve", ["--auto_trim=after_burst", "--no_serve"])):
    err = open(os.path.join(out, name + ".err"), "w")
    p = subprocess.Popen(base + flags, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
    p.stdout.readline()
    ready = p.stdout.readline()  # the ready line: no sleep to wait for it
    if not ready.startswith("rsslab_server ready"):
        sys.exit("service_idle.sh: %s did not start (%s)" % (name, os.path.join(out, name + ".err")))
    data = dict(f.split("=", 1) for f in ready.split() if "=" in f)["data"]
    subprocess.run([lg, "--target=" + data, "--control=", "--requests=2000", "--concurrency=16",
                    "--out=" + os.path.join(out, "warm-" + name)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    svcs[name] = p

def sample(pid):
    rss = int(open("/proc/%d/statm" % pid).read().split()[1]) * page
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return rss, (int(f[11]) + int(f[12])) / tick  # utime, stime

load0 = open("/proc/loadavg").read().split()[:3]
first = {n: sample(p.pid) for n, p in svcs.items()}
rss = {n: [] for n in svcs}
t0 = time.monotonic()
while time.monotonic() - t0 < idle_s:
    time.sleep(10)
    for n, p in svcs.items():
        rss[n].append(sample(p.pid)[0])
elapsed = time.monotonic() - t0
last = {n: sample(p.pid) for n, p in svcs.items()}
load1 = open("/proc/loadavg").read().split()[:3]

def split(pid):
    # At the end: anonymous against file-backed resident memory, and whether
    # gRPC C++ (what serve() needs) is mapped at all.
    kb = {}
    for line in open("/proc/%d/smaps_rollup" % pid):
        f = line.split()
        if len(f) >= 3 and f[2] == "kB":
            kb[f[0].rstrip(":")] = int(f[1])
    # gRPC C++ is linked into the package's _rsslab_grpc extension (a
    # Debian-linked build maps libgrpc++ instead).
    maps = open("/proc/%d/maps" % pid).read()
    grpcpp = "libgrpc++" in maps or "/_rsslab_grpc." in maps
    threads = len(os.listdir("/proc/%d/task" % pid))
    return (kb.get("Anonymous", 0) * 1024, (kb.get("Rss", 0) - kb.get("Anonymous", 0)) * 1024,
            grpcpp, threads)
parts = {n: split(p.pid) for n, p in svcs.items()}
for p in svcs.values():
    p.terminate(); p.wait(10)
mib = 1 << 20
lines = ["# load average at start %s, at end %s; %d s idle, %d samples each" % (
    " ".join(load0), " ".join(load1), elapsed, len(rss["bare"])),
    "| service | RSS mean MiB | RSS max MiB | CPU s in the idle | CPU % of one core | anon MiB at end | file MiB at end | libgrpc++ mapped | threads at end |",
    "|---|---|---|---|---|---|---|---|---|"]
fig = {}
for n in svcs:
    cpu = last[n][1] - first[n][1]
    fig[n] = (sum(rss[n]) / len(rss[n]), max(rss[n]), cpu)
    lines.append("| %s | %.1f | %.1f | %.2f | %.3f | %.1f | %.1f | %s | %d |" % (
        n, fig[n][0] / mib, fig[n][1] / mib, cpu, 100 * cpu / elapsed, parts[n][0] / mib,
        parts[n][1] / mib, "yes" if parts[n][2] else "no", parts[n][3]))
for n in ("package", "package_native", "package_no_serve"):
    lines.append("| %s - bare | %+.1f | %+.1f | %+.2f | %+.3f |" % (
        n, (fig[n][0] - fig["bare"][0]) / mib, (fig[n][1] - fig["bare"][1]) / mib,
        fig[n][2] - fig["bare"][2], 100 * (fig[n][2] - fig["bare"][2]) / elapsed)
        + " %+.1f | %+.1f | |" % ((parts[n][0] - parts["bare"][0]) / mib,
                                  (parts[n][1] - parts["bare"][1]) / mib) + " |")
open(os.path.join(out, "idle.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PYEOF
