#!/usr/bin/env bash
# Server CPU and context switches per request, by thread, for one or more
# rsslab_server binaries (before/after a change), in interleaved rounds.
# Each run: a fresh server pinned to CPU 0 with web_worker.py (flat), the
# loadgen on CPU 1, closed loop with CONC in flight, REQUESTS measured after
# 1,000 warm-up. Reads /proc/PID/task/*/{status,stat} before and after the
# measured requests: voluntary + involuntary switches and utime+stime per
# thread, per request. A benchmark, not a test. Run after ./rsslab build:
#
#   SERVERS="/tmp/old/rsslab_server bin/rsslab_server" bench/server_threads.sh
#   WORKERS=1 ROUNDS=1 BY_THREAD=1 bench/server_threads.sh
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
SERVERS=${SERVERS:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
HANDLER=${HANDLER:-$ROOT/server/handlers/web_worker.py}
WORKERS=${WORKERS:-1 4}
ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-20000}
CONC=${CONC:-16}
BY_THREAD=${BY_THREAD:-0}
for f in $SERVERS "$LOADGEN" "$HANDLER"; do
  [ -e "$f" ] || { echo "server_threads: $f is missing (run ./rsslab build)" >&2; exit 1; }
done
OUT=$(mktemp -d /tmp/rsslab-threads-XXXXXX)
SPID=""
trap '[ -n "$SPID" ] && kill "$SPID" 2>/dev/null || true' EXIT
HZ=$(getconf CLK_TCK)

# "tid comm voluntary involuntary ticks" per thread of $1.
threads() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s %s %s %s\n' "${t##*/}" "$(tr ' ' _ <"$t/comm")" \
      "$(awk '/^voluntary_ctxt/ { v = $2 } /^nonvoluntary_ctxt/ { n = $2 } END { print v, n }' "$t/status")" \
      "$(awk '{ print $14 + $15 }' "$t/stat")"
  done
}

echo "machine: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "handler: $HANDLER (flat); server pinned to CPU 0, loadgen CPU 1, $CONC in flight, $REQUESTS requests per run"
printf "%-5s %-40s %7s %7s %11s %12s\n" round server workers rps cpu_us_req switches_req
n=0
for r in $(seq 1 "$ROUNDS"); do
  for s in $SERVERS; do
    for w in $WORKERS; do
      n=$((n + 1)); d=$OUT/$n; mkdir -p "$d"
      taskset -c 0 "$s" --threads="$w" --handler="$HANDLER" --handler_params=dict_shape=flat \
        --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 >"$d/out" 2>"$d/err" &
      SPID=$!
      wait_ready "$SPID" "$d/out" "$d/err"
      drive() {
        taskset -c 1 "$LOADGEN" --target="$DATA" --control= --requests="$1" --concurrency="$CONC" \
          --channels=4 --progress=none --out="$2" >/dev/null
      }
      drive 1000 "$d/warmup"
      threads "$SPID" >"$d/a"
      drive "$REQUESTS" "$d/run"
      threads "$SPID" >"$d/b"
      kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
      /usr/bin/python3 - "$d" "$r" "$s" "$w" "$REQUESTS" "$HZ" "$BY_THREAD" <<'PY'
import json, sys
d, r, s, w, n, hz, by = sys.argv[1:]
n, hz = int(n), int(hz)
def read(p):
    return {f[0]: (f[1], int(f[2]), int(f[3]), int(f[4])) for f in (l.split() for l in open(p))}
a, b = read(d + "/a"), read(d + "/b")
rows = []
for tid, (comm, v, nv, t) in b.items():
    v0, nv0, t0 = a.get(tid, (comm, 0, 0, 0))[1:]
    rows.append((comm, (v - v0) / n, (nv - nv0) / n, (t - t0) * 1e6 / hz / n))
load = next(e["load"] for e in map(json.loads, open(d + "/run/events.jsonl")) if "load" in e)
print("%-5s %-40s %7s %7.0f %11.1f %12.2f" % (r, s[-40:], w, load["qps"], sum(x[3] for x in rows),
                                              sum(x[1] + x[2] for x in rows)))
if by == "1":
    for comm, v, nv, cpu in sorted(rows):
        if v + nv + cpu > 0.005:
            print("      %-16s voluntary/req %.2f involuntary/req %.2f cpu_us/req %.1f" % (comm, v, nv, cpu))
PY
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); raw runs: $OUT"
