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
