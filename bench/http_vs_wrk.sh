#!/usr/bin/env bash
# Benchmark (not a test): rsslab_loadgen's HTTP load against the reference
# clients on a no-op endpoint of a fast native server (Debian's nginx-light,
# `return 200 "ok"`): wrk on HTTP/1.1 keep-alive, h2load (nghttp2-client) on
# h2c, the same connections, threads and duration for both tools of a pair.
# Prints requests/s and client CPU per request per round, the best of each
# tool, their ratio (goal:
# loadgen >= 0.9 x the reference) and the conditions: command, commit, date,
# load average, pinned or not.
#
#   bench/http_vs_wrk.sh                       # after ./rsslab build: both shapes
#   D=10 C=16 T=2 M=16 ROUNDS=3 bench/http_vs_wrk.sh
#   PIN=1 bench/http_vs_wrk.sh                 # only pinned: nginx on CPU 0, client on CPU 1
#   PIN=0 bench/http_vs_wrk.sh                 # only shared: nothing pinned
#   LOADGEN=/path/rsslab_loadgen bench/http_vs_wrk.sh
#
# Shapes: HTTP/1.1: C connections, one request in flight on each (wrk -c C
# -t T; loadgen --connections=C --client_threads=T). h2c: C connections, M
# streams in flight on each (h2load -c C -m M -t T; loadgen --http_version=h2c
# --connections=C --concurrency=C*M --client_threads=T). Rounds alternate
# which tool goes first, so a burst of background load hits both. The
# loadgen's first second is warm-up (excluded); wrk and h2load measure from
# their first request.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
ROOT=$PWD
. "$ROOT/bench/lib.sh"
D=${D:-10}; C=${C:-16}; T=${T:-2}; M=${M:-16}; ROUNDS=${ROUNDS:-3}
both_shapes best "pinned (nginx CPU 0, client CPU 1): " "shared (nothing pinned):            "
pin_shape
LOADGEN=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 1
for tool in nginx:nginx-light wrk:wrk h2load:nghttp2-client; do
  command -v "${tool%%:*}" >/dev/null || [ -x "/usr/sbin/${tool%%:*}" ] ||
    { echo "bench: ${tool%%:*} missing (apt-get install ${tool#*:})" >&2; exit 1; }
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
bench_workdir

echo "command: $0 (D=$D C=$C T=$T M=$M ROUNDS=$ROUNDS PIN=$PIN)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), date: $(date -u +%FT%TZ)"
print_machine "$("$NGINX" -v 2>&1), $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2), $(h2load --version | head -1), nghttp2 $(pkg-config --modversion libnghttp2 2>/dev/null || echo '?'), Boost $(sed -n 's/^#define BOOST_LIB_VERSION "\(.*\)"/\1/p' /usr/include/boost/version.hpp 2>/dev/null)"

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
H1=$(free_port); H2=$(free_port)
mkdir -p "$WORK/nginx"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fastcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:$H1;
    listen 127.0.0.1:$H2 http2;
    location / { return 200 "ok"; }
  }
}
CONF
"${SRV_PIN[@]}" "$NGINX" -c "$WORK/nginx/nginx.conf" -p "$WORK/nginx" &
SERVER_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$H1") 2>/dev/null && break; sleep 0.1; done

# Each prints "REQ/S CLIENT_CPU_US_PER_REQ": the client's user+sys
# (/usr/bin/time) over every request it sent (the loadgen's warm-up too).
timed() {
  "${CLI_PIN[@]}" /usr/bin/time -f '%U %S' -o "$WORK/time" "$@"
}
cpu_per() {  # N requests
  awk -v n="$1" '{ printf "%.2f", (n > 0 ? ($1 + $2) * 1e6 / n : 0) }' "$WORK/time"
}
run_wrk() {
  timed wrk -t "$T" -c "$C" -d "${D}s" "http://127.0.0.1:$H1/" >"$WORK/wrk.txt"
  echo "$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$WORK/wrk.txt")" \
    "$(cpu_per "$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$WORK/wrk.txt")")"
}
run_h2load() {
  timed h2load -t "$T" -c "$C" -m "$M" -D "$D" "http://127.0.0.1:$H2/" >"$WORK/h2load.txt" 2>&1
  echo "$(sed -n 's/^finished in .*, \([0-9.]*\) req\/s.*/\1/p' "$WORK/h2load.txt")" \
    "$(cpu_per "$(sed -n 's/^requests: \([0-9]*\) total.*/\1/p' "$WORK/h2load.txt")")"
}
loadgen_qps() {
  rm -rf "$WORK/lg"
  timed "$LOADGEN" --control= --duration="${D}s" --warmup=1s --client_threads="$T" \
    --progress=none --out="$WORK/lg" "$@" >/dev/null
  echo "$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="qps") c=i} NR==2{print $c}' "$WORK/lg/summary.csv")" \
    "$(cpu_per "$(/usr/bin/python3 -c 'import json, sys
n = 0
for line in open(sys.argv[1]):
    l = json.loads(line).get("load", {})
    n += sum(int(l.get(k, 0)) for k in ("requests_ok", "requests_failed", "warmup_requests"))
print(n)' "$WORK/lg/events.jsonl")")"
}
run_lg_h1() { loadgen_qps --target="http://127.0.0.1:$H1/" --connections="$C"; }
run_lg_h2c() {
  loadgen_qps --target="http://127.0.0.1:$H2/" --http_version=h2c --connections="$C" \
    --concurrency=$((C * M))
}

echo "pinning: PIN=$PIN$([ "$PIN" = 1 ] && echo ' (nginx CPU 0, client CPU 1)')"
echo "shape: HTTP/1.1 $C connections; h2c $C connections x $M streams; $T client threads; ${D} s a run"
printf '%-6s %-10s %12s %16s\n' round tool req/s client_us/req
: >"$WORK/rounds"
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="wrk lg_h1 h2load lg_h2c"; else order="lg_h1 wrk lg_h2c h2load"; fi
  for t in $order; do
    read -r q cu < <(run_$t) || true
    printf '%-6s %-10s %12.0f %16s\n' "$r" "$t" "${q:-0}" "${cu:-?}"
    echo "$r $t ${q:-0} ${cu:-0}" >>"$WORK/rounds"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
  { q[$2] = ($3 > q[$2]) ? $3 : q[$2]; cu[$2] += $4; k[$2]++ }
  END {
    printf "client CPU per request (mean): wrk %.1f us, rsslab_loadgen HTTP/1.1 %.1f us; h2load %.1f us, rsslab_loadgen h2c %.1f us\n",
      cu["wrk"] / k["wrk"], cu["lg_h1"] / k["lg_h1"], cu["h2load"] / k["h2load"], cu["lg_h2c"] / k["lg_h2c"]
    r1 = q["wrk"] > 0 ? q["lg_h1"] / q["wrk"] : 0
    r2 = q["h2load"] > 0 ? q["lg_h2c"] / q["h2load"] : 0
    printf "best: HTTP/1.1 wrk %.0f req/s, rsslab_loadgen %.0f req/s, ratio %.2f (goal >= 0.90)\n", q["wrk"], q["lg_h1"], r1
    printf "best: h2c h2load %.0f req/s, rsslab_loadgen %.0f req/s, ratio %.2f (goal >= 0.90)\n", q["h2load"], q["lg_h2c"], r2
  }' "$WORK/rounds"
