#!/usr/bin/env bash
# Benchmark (not a test): rsslab_loadgen calling rsslab.v1.Load/Handle
# through --proto/--call/--data (the .proto parsed at run time, requests
# built from a JSON template into dynamic messages, sent on gRPC's generic
# stub) against its built-in generated stub, on the same rsslab_server with
# the no-op handler, in the same run. Prints the median QPS of each over
# ROUNDS runs, their ratio (goal: generic >= 0.9 x built-in, pinned) and the
# client CPU per request of each.
#
#   bench/generic_call.sh                 # after ./rsslab build; both shapes
#   PIN=1 bench/generic_call.sh           # only pinned: server CPU 0, loadgen CPU 1
#   PIN=0 bench/generic_call.sh           # only shared: nothing pinned
#   N=40000 C=64 CH=4 THREADS=4 ROUNDS=5 bench/generic_call.sh
#
# Fairness: the same server, concurrency, channels, request count and
# warm-up; one unmeasured run of each first; rounds interleaved with the
# order alternating, so a burst of background load hits both. The built-in
# stub sends HandleRequest{id, seed}; the template sends the same two fields
# ({"id": {{seq}}, "seed": {{rand_int ...}}}).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
N=${N:-40000}; C=${C:-64}; CH=${CH:-4}; THREADS=${THREADS:-4}; ROUNDS=${ROUNDS:-5}
WARM=${WARM:-1000}
both_shapes median "pinned (server CPU 0, loadgen CPU 1): " "shared (nothing pinned):              "
pin_shape
SERVER=${SERVER:-$(find_bin rsslab_server server)} || exit 1
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
[ -x /usr/bin/time ] || { echo "bench: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
[ -x "$SERVER" ] && [ -x "$LOADGEN" ] || { echo "bench: run ./rsslab build first" >&2; exit 1; }
bench_workdir

print_machine

start_noop_server "$WORK" "$THREADS" "$ROOT/server/handlers/noop.py"

GENERIC=(--proto="$ROOT/proto/load.proto" --call=rsslab.v1.Load/Handle
         '--data={"id": {{seq}}, "seed": {{rand_int 0 4000000000000000000}}}')

# Prints "QPS CLIENT_CPU_US_PER_REQ".
run() {
  local kind=$1 n=$2 extra=()
  [ "$kind" = generic ] && extra=("${GENERIC[@]}")
  rm -rf "$WORK/lg"
  "${CLI_PIN[@]}" /usr/bin/time -f '%U %S' -o "$WORK/lg.time" \
    "$LOADGEN" --target="$DATA" --control= --requests="$n" --concurrency="$C" --channels="$CH" \
    --warmup_requests="$WARM" --progress=none --out="$WORK/lg" ${extra[@]+"${extra[@]}"} >/dev/null
  local q
  q=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="qps") c=i} NR==2{print $c}' "$WORK/lg/summary.csv")
  awk -v q="$q" -v n="$((n + WARM))" '{printf "%s %.2f\n", q, ($1 + $2) * 1e6 / n}' "$WORK/lg.time"
}

run builtin 5000 >/dev/null
run generic 5000 >/dev/null
echo "pinning: PIN=$PIN$([ "$PIN" = 1 ] && echo ' (server CPU 0, loadgen CPU 1)')"
echo "server: threads=$THREADS, handler=noop; $N requests per run, $C in flight over $CH channels, warm-up $WARM requests"
printf '%-6s %-8s %10s %16s\n' round kind req/s client_us/req
: >"$WORK/rounds"
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="builtin generic"; else order="generic builtin"; fi
  for k in $order; do
    read -r q cu < <(run "$k" "$N")
    printf '%-6s %-8s %10.0f %16s\n' "$r" "$k" "$q" "$cu"
    echo "$r $k $q $cu" >>"$WORK/rounds"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
med() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
qb=$(awk '$2=="builtin"{print $3}' "$WORK/rounds" | med)
qg=$(awk '$2=="generic"{print $3}' "$WORK/rounds" | med)
cb=$(awk '$2=="builtin"{print $4}' "$WORK/rounds" | med)
cg=$(awk '$2=="generic"{print $4}' "$WORK/rounds" | med)
awk '{rq[$1, $2] = $3} END {rs = ""; for (r = 1; (r, "builtin") in rq; r++) rs = rs sprintf(" %.2f", rq[r, "generic"] / rq[r, "builtin"]); print "per-round ratio:" rs}' "$WORK/rounds"
awk -v b="$cb" -v g="$cg" 'BEGIN{printf "client CPU per request (median): built-in %.1f us, generic %.1f us\n", b, g}'
awk -v b="$qb" -v g="$qg" 'BEGIN{printf "median: built-in %.0f req/s, generic %.0f req/s, ratio %.2f (goal >= 0.90)\n", b, g, g / b}'
