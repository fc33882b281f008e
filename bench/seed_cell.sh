#!/usr/bin/env bash
# One seed-000 cell (the loadgen's built-in `seed` scenario: fill 96,000
# requests with the cache at 100 MiB, shrink 48,000 at 10 MiB, idle 12 s,
# trim) against a fresh glibc server per thread count; prints the cell's
# wall time and the RSS after each phase. A benchmark, not a test: it tells
# whether a change to the server or the default handler changed how long a
# sweep takes, and that the memory picture did not move. Run after
# ./rsslab build:
#
#   bench/seed_cell.sh                          # THREADS="1 64" SCALE=1
#   SERVER=/tmp/old/rsslab_server HANDLER=/tmp/old/web_worker.py bench/seed_cell.sh
#   HANDLER_PARAMS=dict_shape=nested THREADS=1 bench/seed_cell.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
HANDLER=${HANDLER:-$ROOT/server/handlers/web_worker.py}
HANDLER_PARAMS=${HANDLER_PARAMS:-}
THREADS=${THREADS:-1 64}
SCALE=${SCALE:-1}
for f in "$SERVER" "$LOADGEN" "$HANDLER"; do
  [ -e "$f" ] || { echo "seed_cell: $f is missing (run ./rsslab build)" >&2; exit 1; }
done
OUT=$(mktemp -d /tmp/rsslab-seedcell-XXXXXX)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT

echo "machine: $(nproc) cores, $(uname -r), $(ldd --version | head -1 | sed 's/.*) //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: $SERVER handler=$HANDLER params='$HANDLER_PARAMS'; loadgen --builtin=seed --scale=$SCALE (64 in flight, 4 channels), unpinned"
printf "%-7s %7s %9s %9s %9s %9s %9s %9s\n" threads wall_s fill_qps shrk_qps fill_mib shrk_mib idle_mib trim_mib
for t in $THREADS; do
  d=$OUT/t$t
  mkdir -p "$d"
  "$SERVER" --threads="$t" --handler="$HANDLER" ${HANDLER_PARAMS:+--handler_params="$HANDLER_PARAMS"} \
    --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 >"$d/out" 2>"$d/err" &
  SPID=$!
  wait_ready "$SPID" "$d/out" "$d/err"
  t0=$(date +%s.%N)
  "$LOADGEN" --builtin=seed --scale="$SCALE" --target="$DATA" --control="$CTLADDR" \
    --progress=none --out="$d/run" >/dev/null
  t1=$(date +%s.%N)
  kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
  /usr/bin/python3 - "$d/run/events.jsonl" "$t" "$t0" "$t1" <<'PY'
import json, sys
path, t, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
qps = {}; rss = {}
for line in open(path):
    e = json.loads(line)
    if "load" in e:
        qps[e["load"]["step"]] = e["load"]["qps"]
    if "snapshot" in e and e.get("label"):
        rss[e["label"]] = int(e["snapshot"]["status"]["rss_bytes"]) / 2**20
    if "phase" in e and e.get("loadgen_phase") == "trim":
        rss["after_trim"] = int(e["phase"]["snapshot"]["status"]["rss_bytes"]) / 2**20
print("%-7s %7.1f %9.0f %9.0f %9.1f %9.1f %9.1f %9.1f" % (
    t, t1 - t0, qps.get("fill", 0), qps.get("shrink", 0), rss.get("after_fill", 0),
    rss.get("after_shrink", 0), rss.get("after_idle", 0), rss.get("after_trim", 0)))
PY
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); raw runs: $OUT"
