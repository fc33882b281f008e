#!/usr/bin/env bash
# Snapshot cost: time, bytes allocated through malloc,
# and RSS change of one full snapshot, at 1 and 64 worker threads.
#   part 1: bench/snapshot_cost (the real server core with counting malloc
#           wrappers) after a warm-up of web_worker requests: mean/max time
#           and malloc'd bytes per snapshot, and RSS before/after K snapshots;
#   part 2: a real rsslab_server after the same kind of load: VmRSS (read
#           from outside) before and after 200 GetSnapshot calls
#           (rsslab_ctl snapshot, one connection each) and 200 snapshots on one
#           WatchSnapshots stream (rsslab_ctl watch).
# Goals: < 10 ms and < 64 KiB malloc'd per snapshot at 64 threads; RSS does
# not move measurably. Run after ./rsslab build:
#
#   bench/snapshot_cost.sh                  # THREADS_LIST="1 64" SNAPSHOTS=200 CALLS=200
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
BENCH=${BENCH:-$(find_bin snapshot_cost bench)} || exit 1
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
CTL=${CTL:-$(find_bin rsslab_ctl ctl)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
THREADS_LIST=${THREADS_LIST:-"1 64"}
SNAPSHOTS=${SNAPSHOTS:-200}
CALLS=${CALLS:-200}
WARM=${WARM:-3000}
HANDLER=$ROOT/server/handlers/web_worker.py
OUT=$(mktemp -d /tmp/rsslab-snapcost-XXXXXX)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT
for f in "$BENCH" "$SERVER" "$CTL" "$LOADGEN"; do
  [ -x "$f" ] || { echo "snapshot_cost: $f is missing (run ./rsslab build)" >&2; exit 1; }
done

echo "machine: $(nproc) cores, kernel $(uname -r), glibc $(ldd --version | head -1 | sed 's/.*) //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== part 1: bench/snapshot_cost ($SNAPSHOTS snapshots after $WARM web_worker requests, gc off)"
for t in $THREADS_LIST; do
  "$BENCH" --threads="$t" --handler="$HANDLER" --warm_requests="$WARM" --snapshots="$SNAPSHOTS" \
    >"$OUT/bench-$t" 2>"$OUT/bench-$t.err" || { cat "$OUT/bench-$t.err" >&2; exit 1; }
  echo "-- threads=$t"
  grep -v '^threads=' "$OUT/bench-$t" | paste -sd' ' | fold -s -w 100
done
/usr/bin/python3 - "$OUT" $THREADS_LIST <<'PY'
import sys
out, threads = sys.argv[1], sys.argv[2:]
for t in threads:
    kv = {}
    for line in open("%s/bench-%s" % (out, t)):
        for w in line.split():
            k, _, v = w.partition("=")
            kv[k] = v
    ms, med, cpu = float(kv["time_ms_mean"]), float(kv["time_ms_median"]), float(kv["cpu_ms_mean"])
    b, rss = float(kv["malloc_bytes_mean"]), int(kv["rss_kb_change"])
    verdict = ""
    if t == "64":
        # CPU time is the snapshot's own cost; wall time adds whatever else
        # runs on the machine (the load average is printed above).
        verdict = "\n  goals at 64 threads: < 10 ms of CPU: %s (%.2f ms; wall median %.2f ms %s); < 64 KiB: %s" % (
            "met" if cpu < 10 else "NOT met", cpu, med, "also < 10" if med < 10 else "under load",
            "met" if b < 64 * 1024 else "NOT met")
    print("threads %-3s: CPU %.2f ms, wall mean %.2f / median %.2f / max %s ms, %.1f KiB malloc'd in %s calls, RSS %+d KiB over all snapshots%s"
          % (t, cpu, ms, med, kv["time_ms_max"], b / 1024, kv["malloc_calls_mean"], rss, verdict))
PY

start() {  # threads dir -> SPID DATA CTLADDR
  mkdir -p "$2"
  "$SERVER" --threads="$1" --handler="$HANDLER" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 \
    >"$2/out" 2>"$2/err" &
  SPID=$!
  wait_ready "$SPID" "$2/out" "$2/err"
}
rss_kb() { awk '/VmRSS/ { print $2 }' "/proc/$1/status"; }
durations() {  # JSON lines -> "mean_ms max_ms"
  /usr/bin/python3 -c '
import json, sys
d = [int(json.loads(l)["snapshot_duration_us"]) for l in sys.stdin if l.strip()]
print("%.2f %.2f" % (sum(d) / len(d) / 1000, max(d) / 1000))'
}

echo
echo "== part 2: real rsslab_server, VmRSS from outside (2 x $CALLS GetSnapshot calls, then $CALLS on one watch stream)"
printf "%-8s %9s %22s %15s %17s %17s\n" threads rss_kb get_rss_change_1st/2nd get_ms_mean/max \
  watch_rss_change watch_ms_mean/max
for t in $THREADS_LIST; do
  d=$OUT/server-$t
  start "$t" "$d"
  "$CTL" --control="$CTLADDR" phase fill >/dev/null
  "$LOADGEN" --target="$DATA" --control= --requests="$WARM" --concurrency=64 --channels=4 \
    --progress=none --out="$d/run" >/dev/null
  for i in 1 2 3 4 5; do "$CTL" --control="$CTLADDR" snapshot >/dev/null; done  # first-use costs
  sleep 0.5
  r0=$(rss_kb "$SPID")
  for i in $(seq 1 "$CALLS"); do "$CTL" --control="$CTLADDR" snapshot --json; done >"$d/get.jsonl"
  ra=$(rss_kb "$SPID")
  # A second batch: what the first left is gRPC's per-connection warm-up
  # (every call is a new connection) if this one leaves nothing.
  for i in $(seq 1 "$CALLS"); do "$CTL" --control="$CTLADDR" snapshot --json; done >>"$d/get.jsonl"
  r1=$(rss_kb "$SPID")
  "$CTL" --control="$CTLADDR" watch --interval=10ms --count="$CALLS" --json >"$d/watch.jsonl"
  r2=$(rss_kb "$SPID")
  read -r gm gx < <(durations <"$d/get.jsonl")
  read -r wm wx < <(durations <"$d/watch.jsonl")
  printf "%-8s %9s %22s %15s %17s %17s\n" "$t" "$r0" "$((ra - r0))/$((r1 - ra)) KiB" "$gm/$gx" \
    "$((r2 - r1)) KiB" "$wm/$wx"
  kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
done
echo "(get_ms/watch_ms: the server's own snapshot_duration_us, which times the part after the"
echo " Python info; part 1's time covers the whole TakeSnapshot)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); raw: $OUT"
