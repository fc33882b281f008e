#!/usr/bin/env bash
# Benchmark (not a test): rsslab_loadgen's maximum unary QPS against h2load
# (Debian nghttp2-client) on the same rsslab_server with a no-op handler, in
# the same run; prints both, the ratio (goal: loadgen >= 0.8 x h2load) and
# the client CPU per request of each tool.
#
#   bench/loadgen_vs_h2load.sh            # after ./rsslab build
#   N=50000 C=64 CH=4 THREADS=4 ROUNDS=5 bench/loadgen_vs_h2load.sh
#   SERVER=/path/rsslab_server LOADGEN=/path/rsslab_loadgen bench/...
#   PIN=1 bench/loadgen_vs_h2load.sh      # only pinned: server on CPU 0, client on CPU 1
#   PIN=0 bench/loadgen_vs_h2load.sh      # only shared: nothing pinned
#
# Fairness: both tools get the same load shape (C requests in flight over CH
# HTTP/2 connections: h2load -c CH -m C/CH), the same request count, one
# unmeasured warm-up run each against the same server first, and rounds are interleaved with the order alternating, so a burst
# of background load hits both. The server's thread count is fixed. Client
# CPU is user+sys of the whole client process (/usr/bin/time), divided by
# every request it sent (the loadgen's warm-up requests included).
#
# By default both shapes run, one after the other, each with its own ratio:
# PIN=1: the server runs on CPU 0 and the client on CPU 1 (taskset), the
# shape of the real deployment (loadgen and server on different machines):
# it asks whether the client can saturate the server, not which client is
# cheaper to run beside it.
# PIN=0: nothing is pinned, so client and server share both cores and every
# microsecond the client spends is taken from the server.
#
# h2load counts any HTTP 200 as success, gRPC errors included; the server's
# request counter is not needed here because the no-op handler never fails,
# but h2load's own "requests:" line is printed for the record.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
N=${N:-40000}; C=${C:-64}; CH=${CH:-4}; THREADS=${THREADS:-4}; ROUNDS=${ROUNDS:-3}
WARM=${WARM:-1000}
both_shapes best "pinned (server CPU 0, client CPU 1): " "shared (nothing pinned):             "
pin_shape
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
command -v h2load >/dev/null || { echo "bench: h2load missing (apt-get install nghttp2-client)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
[ -x "$SERVER" ] && [ -x "$LOADGEN" ] || { echo "bench: run ./rsslab build first" >&2; exit 1; }
bench_workdir

print_machine "$(ldd --version | head -1 | sed 's/^ldd //'), $(h2load --version | head -1)"

start_noop_server "$WORK" "$THREADS" "$ROOT/tests/handlers/noop.py"

# An empty HandleRequest is 0 bytes: the gRPC frame is just the 5-byte prefix
# (uncompressed flag + big-endian length 0).
printf '\x00\x00\x00\x00\x00' >"$WORK/req.bin"

# Server CPU seconds so far (utime+stime of the whole process, all threads).
server_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$SERVER_PID/stat"
}

# Each prints "QPS CLIENT_CPU_US_PER_REQ SERVER_CPU_US_PER_REQ".
run_h2load() {
  local n=$1 s0 s1
  s0=$(server_cpu)
  "${CLI_PIN[@]}" /usr/bin/time -f '%U %S' -o "$WORK/h2load.time" \
    h2load -n "$n" -c "$CH" -m $(( (C + CH - 1) / CH )) \
    -H 'content-type: application/grpc' -H 'te: trailers' -d "$WORK/req.bin" \
    "http://$DATA/rsslab.v1.Load/Handle" >"$WORK/h2load.txt" 2>&1
  s1=$(server_cpu)
  local q
  q=$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$WORK/h2load.txt")
  awk -v q="$q" -v n="$n" -v s0="$s0" -v s1="$s1" '{printf "%s %.2f %.2f\n", q, ($1 + $2) * 1e6 / n, (s1 - s0) * 1e6 / n}' "$WORK/h2load.time"
}
run_loadgen() {
  local n=$1 s0 s1
  rm -rf "$WORK/lg"
  s0=$(server_cpu)
  "${CLI_PIN[@]}" /usr/bin/time -f '%U %S' -o "$WORK/lg.time" \
    "$LOADGEN" --target="$DATA" --control= --requests="$n" --concurrency="$C" --channels="$CH" \
    --warmup_requests="$WARM" --progress=none --out="$WORK/lg" >/dev/null
  s1=$(server_cpu)
  local q
  q=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="qps") c=i} NR==2{print $c}' "$WORK/lg/summary.csv")
  awk -v q="$q" -v n="$((n + WARM))" -v s0="$s0" -v s1="$s1" '{printf "%s %.2f %.2f\n", q, ($1 + $2) * 1e6 / n, (s1 - s0) * 1e6 / n}' "$WORK/lg.time"
}

# Warm the server (imports, caches, allocator) with each tool once.
run_loadgen 5000 >/dev/null
run_h2load 5000 >/dev/null
echo "pinning: PIN=$PIN$([ "$PIN" = 1 ] && echo ' (server CPU 0, client CPU 1)')"
echo "server: threads=$THREADS, handler=noop; $N requests per run, $C in flight over $CH connections, loadgen warm-up $WARM requests"
printf '%-6s %-8s %10s %16s %16s\n' round tool req/s client_us/req server_us/req
: >"$WORK/rounds"
for r in $(seq 1 "$ROUNDS"); do
  # Alternate who goes first, so a load burst does not always hit the same tool.
  if (( r % 2 )); then order="h2load loadgen"; else order="loadgen h2load"; fi
  for t in $order; do
    read -r q cu su < <(run_$t "$N")
    printf '%-6s %-8s %10.0f %16s %16s\n' "$r" "$t" "$q" "$cu" "$su"
    echo "$r $t $q $cu $su" >>"$WORK/rounds"
  done
done
grep -E '^requests:' "$WORK/h2load.txt" | sed 's/^/last h2load /'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
  { q[$2] = ($3 > q[$2]) ? $3 : q[$2]; cu[$2] += $4; su[$2] += $5; k[$2]++
    rq[$1, $2] = $3 }
  END {
    rs = ""
    for (r = 1; (r, "h2load") in rq; r++) rs = rs sprintf(" %.2f", rq[r, "loadgen"] / rq[r, "h2load"])
    printf "per-round ratio:%s\n", rs
    printf "client CPU per request (mean): h2load %.1f us, rsslab_loadgen %.1f us (%.1fx)\n",
      cu["h2load"] / k["h2load"], cu["loadgen"] / k["loadgen"], (cu["loadgen"] / k["loadgen"]) / (cu["h2load"] / k["h2load"])
    printf "server CPU per request (mean): under h2load %.1f us, under rsslab_loadgen %.1f us\n",
      su["h2load"] / k["h2load"], su["loadgen"] / k["loadgen"]
    printf "best: h2load %.0f req/s, rsslab_loadgen %.0f req/s, ratio %.2f (goal >= 0.80)\n",
      q["h2load"], q["loadgen"], q["loadgen"] / q["h2load"]
  }' "$WORK/rounds"
