#!/usr/bin/env bash
# The package's benchmark: a grpcio service (python/tests/grpc_service.py:
# Debian's python3-grpcio, the seed handler, a byte-bounded cache) under
# these conditions, each in a fresh process:
#   a  nothing (the package imported for its Control service, not used)
#   b  the seed's advice as people apply it: MALLOC_ARENA_MAX=2 in the
#      environment + malloc_trim(0) from a 60 s timer thread
#   c  the package, no environment change: cap_arenas(2) at import +
#      auto_trim("after_burst")
#   d  jemalloc preloaded + the package (auto_trim, per-thread release)
#   e  mimalloc preloaded + the package (auto_trim, per-thread release)
#   m  mimalloc preloaded, nothing (what (e) is compared with)
#   e3, m3  as e and m with the seed's mimalloc 3.0.1 (tools/mimalloc3.sh,
#      unpacked into .deps/ by ./rsslab setup) instead of Debian 12's 2.0.9
# Burst: fill, shrink (the seed's 96,000 + 48,000 requests times
# RSSLAB_FIX_SCALE, 16 in flight), then 65 s idle with snapshots 12 s and
# 65 s after the burst. Then, for c, d and e, steady load: 300 requests/s
# for RSSLAB_FIX_STEADY_S seconds without a release, and as long again with
# `rsslab_ctl trim` every 2 s (p99 and max latency of each, the longest
# worker pause and global release of those trims).
# Each run appends rows to $RSSLAB_FIX_OUT/table.md, so a sweep can be run
# in chunks (one quiet chunk per few conditions) into one table:
#   RSSLAB_FIX_OUT=results/fix RSSLAB_FIX_WORKERS=64 RSSLAB_FIX_CONDITIONS="e m" \
#     RSSLAB_FIX_PYTHON=venv/bin/python bench/service_fix.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
SCALE=${RSSLAB_FIX_SCALE:-1}
WORKERS=${RSSLAB_FIX_WORKERS:-1 4 16 64}
CONDITIONS=${RSSLAB_FIX_CONDITIONS:-a b c d e m}
STEADY_S=${RSSLAB_FIX_STEADY_S:-20}
OUT=${RSSLAB_FIX_OUT:-$ROOT/results/service_fix-$(date -u +%Y%m%dT%H%M%SZ)}
PY=${RSSLAB_FIX_PYTHON:-/usr/bin/python3}   # with the rsslab wheel installed
LG=$(find_bin rsslab_loadgen loadgen) || exit 2
CTL=$(find_bin rsslab_ctl ctl) || exit 2
LIBS=/usr/lib/x86_64-linux-gnu
MI3=$(mimalloc3_lib)   # pinned in tools/setup/mimalloc3.env
"$PY" -c "import rsslab" || { echo "service_fix.sh: $PY cannot import rsslab (./rsslab wheel; pip install dist/rsslab-*.whl)" >&2; exit 2; }
# Every condition checked before the first run, so a typo or a missing
# library never ends a sweep halfway.
for c in $CONDITIONS; do
  case $c in
    a|b|c|d|e|m) ;;
    e3|m3) "$ROOT/tools/mimalloc3.sh" --check || { echo "service_fix.sh: condition $c needs mimalloc 3 in .deps/ (tools/mimalloc3.sh)" >&2; exit 2; } ;;
    *) echo "service_fix.sh: unknown condition '$c' (a b c d e m e3 m3)" >&2; exit 2 ;;
  esac
done
case $STEADY_S in ''|*[!0-9]*) echo "service_fix.sh: RSSLAB_FIX_STEADY_S must be whole seconds, got '$STEADY_S'" >&2; exit 2 ;; esac
mkdir -p "$OUT"
STEADY=$((300 * STEADY_S))
write_burst_scenario "$OUT/burst-$SCALE.textproto" "$SCALE" service_fix
cat > "$OUT/steady.textproto" <<SCEN
name: "steady"
step { name: "steady" set_phase { phase: "fill" cache_limit_mb: 10 gc: false } }
step { name: "warm" load { rate: 300 requests: 600 } }
step { name: "steady" load { rate: 300 requests: $STEADY } }
SCEN
cat > "$OUT/steady_trim.textproto" <<SCEN
name: "steady_trim"
step { name: "steady_trim" load { rate: 300 requests: $STEADY } }
step { name: "after_steady" snapshot { gc: false } }
SCEN
if [ ! -s "$OUT/table.md" ]; then
  {
    echo "| condition | workers | scale | load at start | rss_fill_mib | rss_12s_mib | rss_65s_mib | first_release_s | fill_qps | fill_p99_ms | steady_p99_ms | with_release_p99_ms | steady_max_ms | with_release_max_ms | worker_pause_max_ms | global_release_max_ms |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  } > "$OUT/table.md"
fi
for w in $WORKERS; do
  for c in $CONDITIONS; do
    dir=$OUT/$c-$w; rm -rf "$dir"; mkdir -p "$dir"
    env=(env -u LD_PRELOAD -u MALLOC_ARENA_MAX -u MIMALLOC_DECOMMIT_DELAY)
    flags=(--workers="$w" --handler="$ROOT/server/handlers/web_worker.py" --peer_dir="$ROOT/bench/peer")
    steady=1
    case $c in
      a) flags+=(--no_package); steady=0 ;;
      b) env+=(MALLOC_ARENA_MAX=2); flags+=(--no_package --timer_trim_s=60 --timer_trim_log="$dir/timer.log"); steady=0 ;;
      c) flags+=(--cap_arenas=2 --auto_trim=after_burst) ;;
      d) env+=(LD_PRELOAD=$LIBS/libjemalloc.so.2); flags+=(--auto_trim=after_burst) ;;
      e|m) env+=(LD_PRELOAD=$LIBS/libmimalloc.so.2) ;;&
      e3|m3) env+=(LD_PRELOAD=$MI3) ;;&
      e|e3) flags+=(--auto_trim=after_burst) ;;
      m|m3) flags+=(--no_package); steady=0 ;;
    esac
    [ "$STEADY_S" -gt 0 ] || steady=0
    cut -d' ' -f1-3 /proc/loadavg > "$dir/load"
    "${env[@]}" "$PY" "$ROOT/python/tests/grpc_service.py" "${flags[@]}" >"$dir/service.out" 2>"$dir/service.err" &
    pid=$!
    wait_ready "$pid" "$dir/service.out" "$dir/service.err"
    "$LG" --scenario="$OUT/burst-$SCALE.textproto" --target="$DATA" --control="$CTLADDR" \
      --out="$dir/burst" >"$dir/loadgen.txt" 2>&1 || true
    if [ "$steady" = 1 ]; then
      "$LG" --scenario="$OUT/steady.textproto" --target="$DATA" --control="$CTLADDR" \
        --out="$dir/steady" >>"$dir/loadgen.txt" 2>&1 || true
      "$LG" --scenario="$OUT/steady_trim.textproto" --target="$DATA" --control="$CTLADDR" \
        --out="$dir/steady_trim" >>"$dir/loadgen.txt" 2>&1 &
      lgpid=$!
      # A release every 2 s while the loadgen runs (each one a Control Trim).
      while kill -0 "$lgpid" 2>/dev/null; do
        sleep 2
        kill -0 "$lgpid" 2>/dev/null && "$CTL" --control="$CTLADDR" trim >>"$dir/trims.txt" 2>&1 || true
      done
      wait "$lgpid" || true
    fi
    kill "$pid"; wait "$pid" 2>/dev/null || true
    /usr/bin/python3 - "$dir" "$c" "$w" "$SCALE" <<'PYEOF' | tee -a "$OUT/table.md"
import json, os, sys
d, c, w, scale = sys.argv[1:]
def events(run):
    snaps, loads = {}, {}
    p = os.path.join(d, run, "events.jsonl")
    if os.path.exists(p):
        for line in open(p):
            e = json.loads(line)
            if "snapshot" in e: snaps[e["label"]] = e["snapshot"]
            if "load" in e: loads[e["label"]] = e["load"]
    return snaps, loads
snaps, loads = events("burst")
mib = lambda s: "%.1f" % (int(s.get("status", {}).get("rss_bytes", 0)) / 1048576.0) if s else "-"
burst_end = int(loads.get("shrink", {}).get("end_unix_nanos", 0)) / 1e9
last = snaps.get("after_65s", {})
times = [int(t["unix_nanos"]) / 1e9 for t in last.get("recent_trims", []) if t.get("trigger", "").startswith("auto")]
tl = os.path.join(d, "timer.log")
if os.path.exists(tl):
    times += [float(x) for x in open(tl).read().split()]
after = [t - burst_end for t in times if t >= burst_end]
first = "%.1f" % min(after) if after else "-"
f = loads.get("fill", {})
ms = lambda l, k: "%.1f" % (l["latency"][k] / 1000) if l else "-"
_, st = events("steady")
tsnaps, tr = events("steady_trim")
s0, s1 = st.get("steady"), tr.get("steady_trim")
pause = glob = "-"
if s1:
    lo, hi = int(s1["start_unix_nanos"]), int(s1["end_unix_nanos"])
    trims = [t for t in tsnaps.get("after_steady", {}).get("recent_trims", [])
             if t.get("trigger") == "manual" and lo <= int(t["unix_nanos"]) <= hi]
    if trims:
        pause = "%.1f" % (max(int(t.get("max_worker_pause_us", 0)) for t in trims) / 1000)
        glob = "%.1f" % (max(int(t.get("trim_duration_us", 0)) for t in trims) / 1000)
load = open(os.path.join(d, "load")).read().split()[0]
print("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s |" % (
    c, w, scale, load, mib(snaps.get("after_fill")), mib(snaps.get("after_12s")), mib(last), first,
    f.get("qps", 0), ms(f, "p99_us"), ms(s0, "p99_us"), ms(s1, "p99_us"), ms(s0, "max_us"),
    ms(s1, "max_us"), pause, glob))
PYEOF
  done
done
