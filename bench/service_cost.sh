#!/usr/bin/env bash
# What the rsslab package costs a busy grpcio service: throughput, latency
# and CPU per request of python/tests/grpc_service.py (16 workers, the seed
# handler, glibc unless RSSLAB_COST_PRELOAD names a library) --bare (no
# rsslab import at all) against the package as docs/PACKAGE.md adds it
# (track, the interceptor, auto_trim("after_burst"), serve() with /metrics).
# RSSLAB_COST_VARIANTS adds the steps between, to see what costs what:
#   imported     the package imported, nothing of it used (no Control)
#   interceptor  track() and grpc_interceptor(), no policy, no Control
#   auto_trim    the same plus auto_trim("after_burst")
#   serve        the same plus serve() (Control over the service's grpcio)
#   serve_native the same with serve(transport="native") (the package's gRPC C++)
#   serve_shared the same with serve(server=) (Control on the service's own server)
#   second_server auto_trim's, plus a grpc.server that serves nothing (no Control)
#   package      the whole of it as docs/PACKAGE.md's five lines have it: serve(server=)
#                with /metrics too (the default pair is "bare package")
# Each run is a fresh service: 2,000 warm-up requests, then RSSLAB_COST_
# REQUESTS (20,000) closed loop with 16 in flight from rsslab_loadgen; the
# service's CPU (/proc/PID/stat utime+stime) is read around the measured
# requests only. Each round rotates the variants' order, so a drift of the
# machine does not favour one side. Shapes:
# "pinned" puts the service on CPU 0 and the loadgen on CPU 1, "unpinned"
# lets the scheduler place both. Prints one table: per shape and variant
# the median QPS, p50, p99 and CPU per request over the rounds (with the
# range), and each variant / bare of each median; then each variant against
# the bare run of its own round (back to back, so a drift of the machine
# over minutes cancels within the pair): the median of those ratios, their
# range and how many rounds cost more than bare. A benchmark, not a test; run
# it with nothing else running:
#   RSSLAB_FIX_PYTHON=venv/bin/python bench/service_cost.sh
#   RSSLAB_COST_ROUNDS=5 RSSLAB_COST_SHAPES=pinned RSSLAB_FIX_PYTHON=venv/bin/python bench/service_cost.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
PY=${RSSLAB_FIX_PYTHON:-/usr/bin/python3}   # with the rsslab wheel installed
OUT=${RSSLAB_COST_OUT:-$ROOT/results/service_cost-$(date -u +%Y%m%dT%H%M%SZ)}
LG=$(find_bin rsslab_loadgen loadgen) || exit 2
ROUNDS=${RSSLAB_COST_ROUNDS:-3}
REQUESTS=${RSSLAB_COST_REQUESTS:-20000}
SHAPES=${RSSLAB_COST_SHAPES:-pinned unpinned}
PRELOAD=${RSSLAB_COST_PRELOAD:-}
VARIANTS=${RSSLAB_COST_VARIANTS:-bare package}
# Bounds before anything starts: a typo is one line, not a half-run.
[[ $ROUNDS =~ ^[0-9]+$ ]] && (( ROUNDS >= 1 && ROUNDS <= 50 )) ||
  { echo "service_cost.sh: RSSLAB_COST_ROUNDS must be 1..50, not '$ROUNDS'" >&2; exit 2; }
[[ $REQUESTS =~ ^[0-9]+$ ]] && (( REQUESTS >= 1000 && REQUESTS <= 1000000 )) ||
  { echo "service_cost.sh: RSSLAB_COST_REQUESTS must be 1000..1000000, not '$REQUESTS'" >&2; exit 2; }
for s in $SHAPES; do
  case $s in pinned|unpinned) ;; *) echo "service_cost.sh: unknown shape '$s' (pinned, unpinned)" >&2; exit 2 ;; esac
done
for v in $VARIANTS; do
  case $v in bare|imported|interceptor|auto_trim|serve|serve_native|serve_shared|second_server|package) ;;
    *) echo "service_cost.sh: unknown variant '$v' (bare, imported, interceptor, auto_trim, serve, serve_native, serve_shared, second_server, package)" >&2; exit 2 ;; esac
done
[[ " $VARIANTS " == *" bare "* ]] || { echo "service_cost.sh: RSSLAB_COST_VARIANTS must include bare (the ratios' base)" >&2; exit 2; }
[[ " $SHAPES " == *" pinned "* ]] && (( $(nproc) < 2 )) &&
  { echo "service_cost.sh: the pinned shape needs 2 cores" >&2; exit 2; }
[ -z "$PRELOAD" ] || [ -r "$PRELOAD" ] ||
  { echo "service_cost.sh: RSSLAB_COST_PRELOAD=$PRELOAD is not a readable file" >&2; exit 2; }
"$PY" -c "import rsslab" || { echo "service_cost.sh: $PY cannot import rsslab (./rsslab wheel; pip install dist/rsslab-*.whl)" >&2; exit 2; }
[ -x "$LG" ] || { echo "service_cost.sh: build //loadgen:rsslab_loadgen first" >&2; exit 2; }
mkdir -p "$OUT"
exec /usr/bin/python3 - "$ROOT" "$PY" "$LG" "$OUT" "$ROUNDS" "$REQUESTS" "$SHAPES" "$PRELOAD" "$VARIANTS" <<'PYEOF'
import json, os, statistics, subprocess, sys, time
root, py, lg, out, rounds, requests, shapes, preload, variants = sys.argv[1:]
rounds, requests, shapes = int(rounds), int(requests), shapes.split()
tick = os.sysconf("SC_CLK_TCK")
env = {k: v for k, v in os.environ.items()
       if k != "LD_PRELOAD" and not k.startswith(("MALLOC_", "MIMALLOC_"))}
if preload:
    env["LD_PRELOAD"] = preload
base = [py, os.path.join(root, "python/tests/grpc_service.py"), "--workers=16",
        "--handler=" + os.path.join(root, "server/handlers/web_worker.py"),
        "--peer_dir=" + os.path.join(root, "bench/peer")]
FLAGS = {"bare": ["--bare"], "imported": ["--no_package", "--no_serve"],
         "interceptor": ["--no_serve"], "auto_trim": ["--no_serve", "--auto_trim=after_burst"], "serve": ["--auto_trim=after_burst"],
         "serve_native": ["--auto_trim=after_burst", "--serve_transport=native"],
         "serve_shared": ["--auto_trim=after_burst", "--serve_on_server"],
         "second_server": ["--no_serve", "--auto_trim=after_burst", "--empty_second_server"],
         "package": ["--auto_trim=after_burst", "--metrics", "--serve_on_server"]}
names = list(dict.fromkeys(variants.split()))
VARIANTS = [(n, FLAGS[n]) for n in names]

def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick

def one(shape, name, flags, tag):
    srv_pin = ["taskset", "-c", "0"] if shape == "pinned" else []
    cli_pin = ["taskset", "-c", "1"] if shape == "pinned" else []
    d = os.path.join(out, tag)
    os.makedirs(d, exist_ok=True)
    err = open(os.path.join(d, "service.err"), "w")
    p = subprocess.Popen(srv_pin + base + flags, env=env, stdout=subprocess.PIPE, stderr=err,
                         text=True)
    try:
        p.stdout.readline()
        ready = p.stdout.readline()
        if not ready.startswith("rsslab_server ready"):
            sys.exit("service_cost.sh: %s did not start (%s)" % (name, err.name))
        data = dict(f.split("=", 1) for f in ready.split() if "=" in f)["data"]
        lgc = cli_pin + [lg, "--target=" + data, "--control=", "--concurrency=16"]
        subprocess.run(lgc + ["--requests=2000", "--out=" + os.path.join(d, "warm")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c0 = cpu_s(p.pid)
        r = subprocess.run(lgc + ["--requests=%d" % requests, "--out=" + os.path.join(d, "run")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        c1 = cpu_s(p.pid)
        if r.returncode != 0:
            sys.exit("service_cost.sh: %s: the loadgen failed: %s"
                     % (tag, (r.stderr.strip().splitlines() or [""])[-1]))
    finally:
        p.terminate()
        p.wait(10)
    load = None
    for line in open(os.path.join(d, "run", "events.jsonl")):
        e = json.loads(line)
        if "load" in e:
            load = e["load"]
    if load is None:
        sys.exit("service_cost.sh: %s: no load figures in %s" % (tag, d))
    if int(load.get("requests_ok", 0)) != requests:
        sys.exit("service_cost.sh: %s: %s of %d requests ok (%s)"
                 % (tag, load.get("requests_ok", 0), requests, load.get("status_counts")))
    lat = load["latency"]
    return {"qps": float(load.get("qps", 0)), "p50": lat["p50_us"] / 1000.0,
            "p99": lat["p99_us"] / 1000.0, "cpu_us": (c1 - c0) * 1e6 / requests}

def steal_s():
    # The host's time taken from this VM (/proc/stat, field 8): what a
    # noisy neighbour costs a run shows here, not in the load average.
    return int(open("/proc/stat").readline().split()[8]) / tick

load0 = open("/proc/loadavg").read().split()[:3]
steal0, wall0 = steal_s(), time.monotonic()
t0 = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
res = {}
for shape in shapes:
    for r in range(rounds):
        k = r % len(VARIANTS)
        order = VARIANTS[k:] + VARIANTS[:k]
        for name, flags in order:
            m = one(shape, name, flags, "%s-%s-%d" % (shape, name, r + 1))
            res.setdefault((shape, name), []).append(m)
            print("  %s %s round %d: %.0f QPS, p99 %.2f ms, %.0f us CPU/request"
                  % (shape, name, r + 1, m["qps"], m["p99"], m["cpu_us"]), file=sys.stderr)
load1 = open("/proc/loadavg").read().split()[:3]
steal = steal_s() - steal0
wall = time.monotonic() - wall0

def med(xs, k):
    v = [x[k] for x in xs]
    return statistics.median(v), min(v), max(v)

lines = ["conditions: %s, %d rounds per shape, %d requests each after 2,000 warm-up, 16 in "
         "flight, 16 workers, allocator %s; load average %s at the start, %s at the end; "
         "CPU stolen by the host %.1f s in %.0f s (%.1f %% of %d CPUs)"
         % (t0, rounds, requests, os.path.basename(preload) or "glibc", " ".join(load0),
            " ".join(load1), steal, wall, 100.0 * steal / (wall * os.cpu_count()), os.cpu_count()),
         "",
         "| shape | variant | QPS (median, range) | p50 ms | p99 ms (median, range) | CPU us/request |",
         "|---|---|---|---|---|---|"]
for shape in shapes:
    m = {}
    for name, _ in VARIANTS:
        xs = res[(shape, name)]
        m[name] = {k: med(xs, k) for k in ("qps", "p50", "p99", "cpu_us")}
        q, p50, p99, cpu = m[name]["qps"], m[name]["p50"], m[name]["p99"], m[name]["cpu_us"]
        lines.append("| %s | %s | %.0f (%.0f-%.0f) | %.2f | %.2f (%.2f-%.2f) | %.0f (%.0f-%.0f) |"
                     % (shape, name, q[0], q[1], q[2], p50[0], p99[0], p99[1], p99[2],
                        cpu[0], cpu[1], cpu[2]))
    for name, _ in VARIANTS:
        if name == "bare":
            continue
        ratio = lambda k: m[name][k][0] / m["bare"][k][0] if m["bare"][k][0] else 0
        lines.append("| %s | **%s / bare** | **%.3f** | %.3f | **%.3f** | **%.3f** |"
                     % (shape, name, ratio("qps"), ratio("p50"), ratio("p99"), ratio("cpu_us")))
# Paired: each round's variant against the bare run of the same round (run
# back to back), so a drift of the machine over minutes cancels within the
# pair; the median of those ratios and their range.
lines += ["", "| shape | variant / bare, paired by round | QPS (median, range) | "
          "CPU per request (median, range) | rounds the variant cost more CPU |", "|---|---|---|---|---|"]
for shape in shapes:
    bare = res[(shape, "bare")]
    for name, _ in VARIANTS:
        if name == "bare":
            continue
        xs = res[(shape, name)]
        q = [x["qps"] / b["qps"] for x, b in zip(xs, bare) if b["qps"]]
        c = [x["cpu_us"] / b["cpu_us"] for x, b in zip(xs, bare) if b["cpu_us"]]
        lines.append("| %s | %s | %.3f (%.3f-%.3f) | **%.3f** (%.3f-%.3f) | %d of %d |"
                     % (shape, name, statistics.median(q), min(q), max(q), statistics.median(c),
                        min(c), max(c), sum(1 for v in c if v > 1), len(c)))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "table.md"), "w").write(text)
print(text, end="")
PYEOF
