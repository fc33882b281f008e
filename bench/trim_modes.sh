#!/usr/bin/env bash
# The server's trim modes side by side (docs/TRIM.md, "The free-block purge
# mode"): for each mode, a fresh server under PROFILE with THREADS workers
# runs the seed cycle at SCALE (fill, shrink, idle 12 s) through
# rsslab_loadgen, then one trim step of that mode and a snapshot. Prints,
# per mode and repeat, RSS at start, after idle and after the trim (MiB),
# what the trim left of after-idle above start, and the free-block purge's
# own figure; then each mode's median.
#
#   bench/trim_modes.sh                                  # mimalloc (2.0.9), 16 workers, scale 0.5
#   PROFILE=mimalloc3 MODES="TRIM_PER_THREAD TRIM_FREE_BLOCK_PURGE" REPEATS=3 bench/trim_modes.sh
#   BIN=/tmp/mybin bench/trim_modes.sh                   # binaries from elsewhere
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
find_run_bins || exit 1
PROFILE=${PROFILE:-mimalloc}
THREADS=${THREADS:-16}
SCALE=${SCALE:-0.5}
REPEATS=${REPEATS:-3}
MODES=${MODES:-"TRIM_PER_THREAD TRIM_FREE_BLOCK_PURGE"}
[[ $REPEATS =~ ^[1-9]$ ]] || { echo "trim_modes: REPEATS must be 1..9, got '$REPEATS'" >&2; exit 2; }
[[ $THREADS =~ ^[0-9]{1,4}$ ]] && (( THREADS >= 1 && THREADS <= 1024 )) \
  || { echo "trim_modes: THREADS must be 1..1024, got '$THREADS'" >&2; exit 2; }
bench_workdir
RPID=""
trap '[ -n "$RPID" ] && kill "$RPID" 2>/dev/null; rm -rf "$WORK"' EXIT

# The seed cycle without its own trim, then the mode's trim and a snapshot.
"$LOADGEN" --print_builtin=seed | grep -v 'phase: "trim"' >"$WORK/cycle.textproto"

print_machine "profile $PROFILE, $THREADS workers, seed --scale=$SCALE, $REPEATS repeats"
printf "%-22s %3s %9s %9s %9s %9s %9s\n" mode rep start_mib idle_mib trim_mib left_x purged_mib
for mode in $MODES; do
  for r in $(seq 1 "$REPEATS"); do
    d=$WORK/$mode-$r; mkdir -p "$d"
    { cat "$WORK/cycle.textproto"
      echo "step { name: \"trim\" trim { mode: $mode } }"
      echo 'step { name: "after_trim" snapshot { gc: true } }'; } >"$d/scenario.textproto"
    "$RUN_BIN" --profile="$PROFILE" --profile_file="$ROOT/agent/profiles.textproto" \
      --server_binary="$SERVER" -- --threads="$THREADS" --listen=127.0.0.1:0 \
      --control_listen=127.0.0.1:0 >"$d/server.out" 2>"$d/server.err" &
    RPID=$!
    wait_ready "$RPID" "$d/server.out" "$d/server.err" 'ready'
    if ! "$LOADGEN" --target="$DATA" --control="$CTLADDR" --scenario="$d/scenario.textproto" \
        --scale="$SCALE" --progress=none --out="$d/run" >"$d/loadgen.out" 2>&1; then
      echo "trim_modes: $mode repeat $r: rsslab_loadgen failed: $(tail -1 "$d/loadgen.out")" >&2
      kill -TERM $RPID; wait $RPID || true; RPID=""; continue
    fi
    kill -TERM $RPID; wait $RPID || true; RPID=""
    /usr/bin/python3 - "$d/run/events.jsonl" "$mode" "$r" <<'PY'
import json, sys
M = 1 << 20
rss, purged = {}, 0
for line in open(sys.argv[1]):
    ev = json.loads(line)
    label = ev.get("label")
    if label == "fill" and "phase" in ev and "start" not in rss:
        rss["start"] = int(ev["phase"]["snapshot"]["status"]["rss_bytes"])
    elif label in ("after_idle", "after_trim") and "snapshot" in ev:
        rss[label] = int(ev["snapshot"]["status"]["rss_bytes"])
    elif label == "trim" and "trim" in ev:
        t = ev["trim"].get("trim", ev["trim"])
        purged = int(t.get("free_block_purge", {}).get("bytes", 0))
s, i, t = rss["start"], rss["after_idle"], rss["after_trim"]
print("%-22s %3s %9.1f %9.1f %9.1f %9.2f %9.1f" % (
    sys.argv[2], sys.argv[3], s / M, i / M, t / M, (t - s) / float(i - s), purged / M))
PY
  done
done | tee "$WORK/rows.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Each mode's median of left_x (after trim above start / after idle above start).
/usr/bin/python3 - "$WORK/rows.txt" <<'PY'
import statistics, sys
v = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0].startswith("TRIM_"):
        v.setdefault(f[0], []).append(float(f[5]))
for mode, xs in v.items():
    print("median %-22s left_x %.2f (%d repeats)" % (mode, statistics.median(xs), len(xs)))
PY
