#!/usr/bin/env bash
# What a trim costs under load (docs/TRIM.md): steady open-loop load at a fixed rate
# (rsslab_loadgen --rate) against a fresh server per cell, with trims during
# it, for each allocator profile and thread count. Conditions:
#   none         no trim (the reference)
#   global       rsslab_ctl trim --mode=global every TRIM_EVERY seconds
#   per_thread   rsslab_ctl trim (global + per-thread pass) every TRIM_EVERY s
#   auto_iv      --auto_trim=interval, interval = spacing = TRIM_EVERY, gap 0
#                (automatic trims forced to fire during load)
#   auto_burst   --auto_trim=after_burst, default knobs (goal c: the policy
#                on under steady load; it should not fire)
# Before the measured step the cache is filled (FILL requests, 100 MiB cap)
# and shrunk to 10 MiB so there is memory to give back.
# Prints qps, p99, p99.9 (ms), trims done and their median/max duration and
# the largest worker pause, and, against the same profile and thread count's
# `none` cell of this run (run `none` first, as the default order does):
# d_p99/d_p999 = p99/p99.9 change in %, d_qps = throughput change in %.
#
#   bench/trim_cost.sh                                    # all 11 profiles, 1 and 64 threads
#   PROFILES="glibc mimalloc" THREADS="1 64" RATE=300 DURATION=10s bench/trim_cost.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
find_run_bins || exit 1
CTL_BIN=$(find_bin rsslab_ctl ctl) || exit 1
RATE=${RATE:-300}
DURATION=${DURATION:-10s}
TRIM_EVERY=${TRIM_EVERY:-2}
FILL=${FILL:-4000}
THREADS=${THREADS:-"1 64"}
CONDITIONS=${CONDITIONS:-"none global per_thread auto_iv auto_burst"}
PROFILES=${PROFILES:-$(sed -n 's/^  name: "\(.*\)"/\1/p' agent/profiles.textproto)}
OUT=${OUT:-$(mktemp -d /tmp/rsslab-trimcost-XXXXXX)}
export RSSLAB_HOME=$ROOT
RPID=""; TPID=""
trap '[ -n "$TPID" ] && kill "$TPID" 2>/dev/null; [ -n "$RPID" ] && kill "$RPID" 2>/dev/null || true' EXIT

echo "# machine: $(nproc) cores; rate=$RATE/s duration=$DURATION trim every ${TRIM_EVERY}s; out=$OUT"
printf "%-16s %4s %-10s %7s %8s %9s %5s %11s %11s %12s %6s %7s %7s %6s\n" profile thr condition qps p99_ms p999_ms trims trim_med_ms trim_max_ms max_pause_ms failed d_p99 d_p999 d_qps
for p in $PROFILES; do
  for t in $THREADS; do
    for c in $CONDITIONS; do
      d=$OUT/$p-$t-$c; mkdir -p "$d"
      extra=()
      case $c in
        auto_iv) extra=(--auto_trim=interval --auto_trim_interval_s="$TRIM_EVERY"
                        --auto_trim_min_spacing_s="$TRIM_EVERY" --auto_trim_gap_mb=0) ;;
        auto_burst) extra=(--auto_trim=after_burst) ;;
      esac
      "$RUN_BIN" --profile="$p" --profile_file="$ROOT/agent/profiles.textproto" \
        --server_binary="$SERVER" -- --threads="$t" --listen=127.0.0.1:0 \
        --control_listen=127.0.0.1:0 "${extra[@]}" >"$d/server.out" 2>"$d/server.err" &
      RPID=$!
      wait_ready "$RPID" "$d/server.out" "$d/server.err" 'ready'
      data=$DATA; ctl=$CTLADDR
      "$CTL_BIN" --control="$ctl" phase fill >/dev/null
      "$LOADGEN" --target="$data" --control= --requests="$FILL" --progress=none \
        --out="$d/fill" >/dev/null 2>&1
      "$CTL_BIN" --control="$ctl" phase shrink >/dev/null
      : >"$d/trims.jsonl"
      if [ "$c" = global ] || [ "$c" = per_thread ]; then
        mode=default; [ "$c" = global ] && mode=global
        ( sleep 1; while true; do
            "$CTL_BIN" --control="$ctl" --json trim --mode=$mode >>"$d/trims.jsonl" 2>/dev/null || true
            sleep "$TRIM_EVERY"; done ) &
        TPID=$!
      fi
      "$LOADGEN" --target="$data" --control= --rate="$RATE" --duration="$DURATION" \
        --warmup=1s --progress=none --out="$d/run" >"$d/loadgen.out" 2>&1 || true
      [ -n "$TPID" ] && { kill $TPID 2>/dev/null || true; wait $TPID 2>/dev/null || true; TPID=""; }
      "$CTL_BIN" --control="$ctl" --json snapshot >"$d/final.json"
      kill -TERM $RPID; wait $RPID || true; RPID=""
      python3 - "$d" "$p" "$t" "$c" "$OUT/$p-$t-none/result.json" <<'PY'
import json, os, sys, statistics
d, p, t, c, ref_path = sys.argv[1:]
load = None
for line in open(d + "/run/events.jsonl"):
    e = json.loads(line)
    if "load" in e: load = e["load"]
durs, pauses = [], []
def add(tr):
    durs.append((int(tr.get("trim_duration_us", 0)) + int(tr.get("per_thread_duration_us", 0))) / 1e3)
    pauses.append(int(tr.get("max_worker_pause_us", 0)) / 1e3)
for line in open(d + "/trims.jsonl"):
    line = line.strip()
    if not line: continue
    try: e = json.loads(line)
    except ValueError: continue
    if "trim" in e: add(e["trim"])
if c.startswith("auto"):
    snap = json.load(open(d + "/final.json"))
    for tr in snap.get("recent_trims", []):
        if tr.get("trigger", "").startswith("auto"): add(tr)
lat = load["latency"] if load else {}
def failed(l):
    if not l: return "-"
    sc = l.get("status_counts", {})
    if isinstance(sc, dict): return sum(int(v) for k, v in sc.items() if k not in ("OK", "0"))
    return sum(int(x.get("count", 0)) for x in sc if x.get("code", "OK") not in ("OK", 0))
res = {"qps": load["qps"] if load else 0, "p99_ms": lat.get("p99_us", 0) / 1e3,
       "p999_ms": lat.get("p999_us", 0) / 1e3}
json.dump(res, open(d + "/result.json", "w"))
ref = json.load(open(ref_path)) if os.path.exists(ref_path) else None
def delta(k):
    if ref is None or not ref[k]: return "-"
    return "%+.1f" % (100.0 * (res[k] / ref[k] - 1))
print("%-16s %4s %-10s %7.1f %8.2f %9.2f %5d %11.2f %11.2f %12.2f %6s %7s %7s %6s" % (
    p, t, c, res["qps"], res["p99_ms"], res["p999_ms"],
    len(durs), statistics.median(durs) if durs else 0, max(durs) if durs else 0,
    max(pauses) if pauses else 0, failed(load), delta("p99_ms"), delta("p999_ms"), delta("qps")))
PY
    done
  done
done
