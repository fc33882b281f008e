#!/usr/bin/env bash
# Issue 25's benchmark at a reduced scale: a grpcio service
# (python/tests/grpc_service.py: Debian's python3-grpcio, the seed handler,
# a byte-bounded cache) under five conditions, each in a fresh process:
#   a  nothing (the package loaded, not used)
#   b  the seed's advice as people apply it: MALLOC_ARENA_MAX=2 in the
#      environment + malloc_trim(0) from a 60 s timer thread
#   c  the package, no environment change: cap_arenas(2) at import +
#      auto_trim("after_burst")
#   d  jemalloc preloaded + the package (auto_trim, per-thread release)
#   e  mimalloc preloaded + the package (auto_trim, per-thread release)
#   m  mimalloc preloaded, nothing (the base (e) is compared with)
# Scenario: fill, shrink (the seed's at RSSLAB_FIX_SCALE), then 65 s of
# idle with snapshots at 12 s and 65 s after the burst. Prints one table row
# per condition and worker count. Run it under the bench lock:
#   flock -x /tmp/rsslab-bench.lock bench/service_fix.sh
# RSSLAB_FIX_WORKERS="4 16" RSSLAB_FIX_SCALE=0.3 RSSLAB_FIX_CONDITIONS="a b c d e m"
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
SCALE=${RSSLAB_FIX_SCALE:-0.3}
WORKERS=${RSSLAB_FIX_WORKERS:-16}
CONDITIONS=${RSSLAB_FIX_CONDITIONS:-a b c d e}
OUT=${RSSLAB_FIX_OUT:-$ROOT/results/service_fix-$(date -u +%Y%m%dT%H%M%SZ)}
PY=${RSSLAB_FIX_PYTHON:-/usr/bin/python3}   # with the rsslab wheel installed
LG=$ROOT/.bazel/bin/loadgen/rsslab_loadgen
LIBS=/usr/lib/x86_64-linux-gnu
mkdir -p "$OUT"
"$PY" -c "import rsslab" || { echo "service_fix.sh: $PY cannot import rsslab (./rsslab wheel; pip install dist/rsslab-*.whl)" >&2; exit 2; }
[ -x "$LG" ] || { echo "service_fix.sh: build //loadgen:rsslab_loadgen first" >&2; exit 2; }
FILL=$(awk -v s="$SCALE" 'BEGIN{printf "%d", 96000*s}')
SHRINK=$(awk -v s="$SCALE" 'BEGIN{printf "%d", 48000*s}')
cat > "$OUT/scenario.textproto" <<SCEN
name: "service_fix"
description: "fill, shrink, then 65 s idle with snapshots at 12 s and 65 s after the burst"
step { name: "fill" set_phase { phase: "fill" cache_limit_mb: 100 } }
step { name: "fill" load { requests: $FILL } }
step { name: "after_fill" snapshot { gc: false } }
step { name: "shrink" set_phase { phase: "shrink" cache_limit_mb: 10 } }
step { name: "shrink" load { requests: $SHRINK } }
step { name: "idle" set_phase { phase: "idle" gc: false } }
step { name: "idle" wait { seconds: 12 } }
step { name: "after_12s" snapshot { gc: false } }
step { name: "idle" wait { seconds: 53 } }
step { name: "after_65s" snapshot { gc: false } }
SCEN
echo "# $(uptime)" | tee "$OUT/table.md"
echo "| condition | workers | rss_fill_mib | rss_12s_mib | rss_65s_mib | first_release_s | fill_qps | fill_p99_ms |" | tee -a "$OUT/table.md"
echo "|---|---|---|---|---|---|---|---|" | tee -a "$OUT/table.md"
for w in $WORKERS; do
  for c in $CONDITIONS; do
    dir=$OUT/$c-$w; mkdir -p "$dir"
    env=(env -u LD_PRELOAD -u MALLOC_ARENA_MAX -u MIMALLOC_DECOMMIT_DELAY)
    flags=(--workers="$w" --handler="$ROOT/server/handlers/web_worker.py" --peer_dir="$ROOT/bench/peer")
    case $c in
      a) flags+=(--no_package) ;;
      b) env+=(MALLOC_ARENA_MAX=2); flags+=(--no_package --timer_trim_s=60 --timer_trim_log="$dir/timer.log") ;;
      c) flags+=(--cap_arenas=2 --auto_trim=after_burst) ;;
      d) env+=(LD_PRELOAD=$LIBS/libjemalloc.so.2); flags+=(--auto_trim=after_burst) ;;
      e) env+=(LD_PRELOAD=$LIBS/libmimalloc.so.2); flags+=(--auto_trim=after_burst) ;;
      m) env+=(LD_PRELOAD=$LIBS/libmimalloc.so.2); flags+=(--no_package) ;;
      *) echo "service_fix.sh: unknown condition '$c' (a b c d e m)" >&2; exit 2 ;;
    esac
    "${env[@]}" "$PY" "$ROOT/python/tests/grpc_service.py" "${flags[@]}" >"$dir/service.out" 2>"$dir/service.err" &
    pid=$!
    wait_ready "$pid" "$dir/service.out" "$dir/service.err"
    "$LG" --scenario="$OUT/scenario.textproto" --concurrency=16 --target="$DATA" --control="$CTLADDR" \
      --out="$dir/run" >"$dir/loadgen.txt" 2>&1 || true
    kill "$pid"; wait "$pid" 2>/dev/null || true
    /usr/bin/python3 - "$dir" "$c" "$w" <<'PYEOF' | tee -a "$OUT/table.md"
import json, os, sys
d, c, w = sys.argv[1:]
snaps, loads = {}, {}
for line in open(os.path.join(d, "run/events.jsonl")):
    e = json.loads(line)
    if "snapshot" in e: snaps[e["label"]] = e["snapshot"]
    if "load" in e: loads[e["label"]] = e["load"]
mib = lambda s: "%.1f" % (int(s.get("status", {}).get("rss_bytes", 0)) / 1048576.0) if s else "-"
burst_end = int(loads.get("shrink", {}).get("end_unix_nanos", 0)) / 1e9
first = "-"
last = snaps.get("after_65s", {})
times = [int(t["unix_nanos"]) / 1e9 for t in last.get("recent_trims", []) if t.get("trigger", "").startswith("auto")]
tl = os.path.join(d, "timer.log")
if os.path.exists(tl):
    times += [float(x) for x in open(tl).read().split()]
after = [t - burst_end for t in times if t >= burst_end]
if after: first = "%.1f" % min(after)
f = loads.get("fill", {})
print("| %s | %s | %s | %s | %s | %s | %.0f | %.1f |" % (c, w, mib(snaps.get("after_fill")), mib(snaps.get("after_12s")),
      mib(last), first, f.get("qps", 0), f.get("latency", {}).get("p99_us", 0) / 1000))
PYEOF
  done
done
echo "# $(uptime)" | tee -a "$OUT/table.md"
