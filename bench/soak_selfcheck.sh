#!/usr/bin/env bash
# The tool must not leak itself (a soak would measure the leak): a server
# with the noop handler (it stores nothing) under steady open-loop load for
# MINUTES, sampling the
# server's threads and RSS every INTERVAL seconds through
# `rsslab_ctl snapshot --json` and the loadgen's own RSS from /proc. Reports
# whether the thread count is constant after the warm-up, and the RSS slope
# (least squares, MB/hour) of server and loadgen. Run after ./rsslab build:
#
#   bench/soak_selfcheck.sh                  # 20 minutes at 300 req/s
#   MINUTES=2 RATE=200 bench/soak_selfcheck.sh
#   BIN=/some/dir bench/soak_selfcheck.sh    # binaries from elsewhere
#   ANALYZE=/tmp/rsslab-soakcheck-XXXX bench/soak_selfcheck.sh   # re-report a run
#
# Exit status 1 if the server's thread count changed after the warm-up.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVER=$(find_bin rsslab_server server) || exit 1
LOADGEN=$(find_bin rsslab_loadgen loadgen) || exit 1
CTL_BIN=$(find_bin rsslab_ctl ctl) || exit 1
MINUTES=${MINUTES:-20}
RATE=${RATE:-300}
THREADS=${THREADS:-4}
INTERVAL=${INTERVAL:-10}
WARMUP_S=${WARMUP_S:-60}
OUT=${ANALYZE:-${OUT:-$(mktemp -d /tmp/rsslab-soakcheck-XXXXXX)}}
mkdir -p "$OUT"
SAMPLES=$OUT/samples.tsv
SPID="" LPID=""
cleanup() {
  [ -n "$LPID" ] && kill "$LPID" 2>/dev/null || true
  [ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true
}
trap cleanup EXIT

if [ -z "${ANALYZE:-}" ]; then
"$SERVER" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 --threads="$THREADS" \
  --handler="$ROOT/server/handlers/noop.py" >"$OUT/server.out" 2>"$OUT/server.err" &
SPID=$!
wait_ready "$SPID" "$OUT/server.out" "$OUT/server.err"
CTL=$CTLADDR

# One load step for the whole run (plus 30 s of slack for the last samples);
# open loop so the offered load is the same from start to end.
TOTAL_S=$((MINUTES * 60))
"$LOADGEN" --target="$DATA" --control= --rate="$RATE" \
  --duration="$((TOTAL_S + 30))s" --channels=4 --max_errors=1000000 --progress=none \
  --out="$OUT/run" >"$OUT/loadgen.out" 2>"$OUT/loadgen.err" &
LPID=$!

echo "machine: $(nproc) cores, $(uname -r); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: noop handler, --threads=$THREADS; loadgen: open loop --rate=$RATE, $MINUTES min;" \
  "samples every ${INTERVAL}s; warm-up ${WARMUP_S}s; out: $OUT"
echo -e "t_s\tserver_threads\tserver_rss\tloadgen_rss\trequests_served\tloadavg1\tthread_names" >"$SAMPLES"
T0=$(date +%s)
while :; do
  now=$(date +%s)
  t=$((now - T0))
  [ "$t" -gt "$TOTAL_S" ] && break
  kill -0 $LPID 2>/dev/null || { echo "loadgen exited early" >&2; cat "$OUT/loadgen.err" >&2; exit 1; }
  snap=$("$CTL_BIN" --control="$CTL" snapshot --json)
  lrss=$(awk '/^VmRSS:/ {print $2 * 1024}' /proc/$LPID/status)
  python3 - "$t" "$lrss" "$(cut -d' ' -f1 /proc/loadavg)" "$snap" >>"$SAMPLES" <<'PY'
import json, sys
t, lrss, load, snap = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
st = snap.get("status", {})
names = ",".join("%s:%d" % (n["comm"], n.get("count", 0)) for n in snap.get("thread_names", []))
print("\t".join(str(x) for x in (t, st.get("threads", 0), st.get("rss_bytes", 0), lrss,
                                 snap.get("requests_served", 0), load, names)))
PY
  sleep "$INTERVAL"
done
kill -INT $LPID 2>/dev/null || true
wait $LPID || true
LPID=""
fi

python3 - "$SAMPLES" "$WARMUP_S" "$RATE" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
warm = float(sys.argv[2])
names = {r[0]: r[6] if len(r) > 6 else "" for r in rows}
rows = [[float(x) for x in r[:6]] for r in rows]
steady = [r for r in rows if r[0] >= warm]
if len(steady) < 3:
    sys.exit("too few samples after the warm-up; raise MINUTES")

def slope_mb_per_hour(col, rows_=None):
    rows_ = rows_ or steady
    xs = [r[0] for r in rows_]
    ys = [r[col] / 1e6 for r in rows_]
    n = len(xs); mx = sum(xs) / n; my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx * 3600

threads = sorted(set(int(r[1]) for r in steady))
served = steady[-1][4] - steady[0][4]
span = steady[-1][0] - steady[0][0]
loads = [r[5] for r in rows]
print("samples after warm-up: %d over %.0f s; achieved %.0f req/s (asked %s)"
      % (len(steady), span, served / span if span else 0, sys.argv[3]))
print("server threads after warm-up: %s (%s)"
      % (",".join(map(str, threads)), "constant" if len(threads) == 1 else "CHANGED"))
if len(threads) > 1:
    seen = []
    for r in steady:
        n = names[str(int(r[0]))] if str(int(r[0])) in names else ""
        if n not in seen:
            seen.append(n)
            print("  at %4d s: %d threads: %s" % (r[0], r[1], n))
for name, col in (("server", 2), ("loadgen", 3)):
    half = steady[len(steady) // 2:]
    print("%-7s RSS: first %.1f MB, last %.1f MB, min %.1f, max %.1f; slope %+.2f MB/hour"
          " after warm-up, %+.2f MB/hour over the second half"
          % (name, steady[0][col] / 1e6, steady[-1][col] / 1e6,
             min(r[col] for r in steady) / 1e6, max(r[col] for r in steady) / 1e6,
             slope_mb_per_hour(col), slope_mb_per_hour(col, half)))
print("load average 1 min during the run: min %.2f, max %.2f" % (min(loads), max(loads)))
sys.exit(0 if len(threads) == 1 else 1)
PY
