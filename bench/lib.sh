# Shared by the bench/*.sh scripts: `. "$ROOT/bench/lib.sh"`.

# wait_ready PID OUT ERR [PATTERN]: waits for the ready line (by default
# "rsslab_server ready data=... control=...", which the Python peer prints
# too; rsslab_run's differs) in file OUT; exits with ERR's text if PID dies
# first. Sets DATA and CTLADDR.
wait_ready() {
  local pid=$1 out=$2 err=$3 pattern=${4:-'^rsslab_server ready'}
  until grep -q "$pattern" "$out" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { cat "$err" >&2; exit 1; }
    sleep 0.05
  done
  DATA=$(sed -n 's/.*data=\([^ ]*\).*/\1/p' "$out" | head -1)
  CTLADDR=$(sed -n 's/.*control=\([^ ]*\).*/\1/p' "$out" | head -1)
}

# pin_shape: from PIN (1: server on CPU 0, client on CPU 1; else nothing
# pinned) sets the SRV_PIN and CLI_PIN command prefixes.
pin_shape() {
  if [ "${PIN:-0}" = 1 ]; then
    (( $(nproc) >= 2 )) || { echo "bench: PIN=1 needs 2 cores" >&2; exit 1; }
    SRV_PIN=(taskset -c 0); CLI_PIN=(taskset -c 1)
  else
    SRV_PIN=(); CLI_PIN=()
  fi
}

# start_noop_server WORK THREADS HANDLER: rsslab_server ($SERVER) under
# SRV_PIN on loopback ports; sets SERVER_PID, DATA and CTLADDR.
start_noop_server() {
  "${SRV_PIN[@]}" "$SERVER" --listen=127.0.0.1:0 --control_listen=127.0.0.1:0 --threads="$2" \
    --handler="$3" >"$1/server.out" 2>"$1/server.err" &
  SERVER_PID=$!
  wait_ready "$SERVER_PID" "$1/server.out" "$1/server.err"
}
