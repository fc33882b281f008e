#!/usr/bin/env bash
# How often `rsslab_loadgen gate` cries wolf, and how often it catches a
# real change (docs/GATE.md, "How often it is wrong"). On
# tests/gate/gate_service.py (grpcio, the rsslab package, the seed's handler
# and cache) with tests/gate/burst.textproto:
#   identical  RSSLAB_GATE_PAIRS gates (default 20) of the same service on
#              both sides: the false-alarm rate is the share that exit 1
#   +10 %, +25 % RSSLAB_GATE_DETECT gates each (default 5) whose head keeps
#              a buffer of 10 % and 25 % of the base's median RSS under load
#              (gate_service.py --retain_mb, sized from the identical gates):
#              the detection rate is the share that exit 1
# Each gate runs with the defaults but --min_repeats (RSSLAB_GATE_MIN,
# default 5) and --max_repeats (RSSLAB_GATE_MAX, default 8). Prints every
# gate's exit, the rates with their counts, the "can't tell" shares, and
# the conditions (command, commit, date, load average, CPUs, unpinned).
# About 11 minutes on 2 quiet cores at the defaults.
#
#   bench/gate_rates.sh
#   RSSLAB_GATE_PAIRS=2 RSSLAB_GATE_DETECT=1 RSSLAB_GATE_MIN=2 RSSLAB_GATE_MAX=2 bench/gate_rates.sh  # a smoke run
# Needs the package importable by /usr/bin/python3 (RSSLAB_GATE_PYTHONPATH: a
# directory holding rsslab/, e.g. an unpacked wheel; default: the installed one).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
LG=${LOADGEN:-$(find_bin rsslab_loadgen loadgen)} || exit 2
PAIRS=${RSSLAB_GATE_PAIRS:-20}
DETECT=${RSSLAB_GATE_DETECT:-5}
MIN=${RSSLAB_GATE_MIN:-5}
MAX=${RSSLAB_GATE_MAX:-8}
OUT=${RSSLAB_GATE_OUT:-$ROOT/results/gate_rates-$(date -u +%Y%m%dT%H%M%SZ)}
for v in "PAIRS=$PAIRS:1:500" "DETECT=$DETECT:0:500" "MIN=$MIN:2:200" "MAX=$MAX:2:200"; do
  IFS=: read -r kv lo hi <<<"$v"
  n=${kv#*=}
  [[ $n =~ ^[0-9]+$ ]] && (( n >= lo && n <= hi )) ||
    { echo "gate_rates.sh: RSSLAB_GATE_${kv%%=*} must be $lo..$hi, not '$n'" >&2; exit 2; }
done
(( MIN <= MAX )) || { echo "gate_rates.sh: RSSLAB_GATE_MIN ($MIN) is above RSSLAB_GATE_MAX ($MAX)" >&2; exit 2; }
export PYTHONPATH=${RSSLAB_GATE_PYTHONPATH:-${PYTHONPATH:-}}
/usr/bin/python3 -c "import rsslab" 2>/dev/null ||
  { echo "gate_rates.sh: /usr/bin/python3 cannot import rsslab (./rsslab wheel, then RSSLAB_GATE_PYTHONPATH=DIR with DIR/rsslab)" >&2; exit 2; }
mkdir -p "$OUT"
SERVICE="/usr/bin/python3 $ROOT/tests/gate/gate_service.py --port={port} --threads={threads} --handler=$ROOT/server/handlers/web_worker.py --peer_dir=$ROOT/bench/peer"
START=$(date +%s)

# gate NAME [FLAG...]: one gate; prints "NAME EXIT SHIFT_PCT" (the change of
# RSS under load as the table prints it).
gate() {
  local name=$1 rc=0
  shift
  "$LG" gate --out="$OUT/$name" --service="$SERVICE" \
    --ready='^rsslab_server ready .*control=(?P<control>\S+)' \
    --scenario="$ROOT/tests/gate/burst.textproto" --profile_file="$ROOT/agent/profiles.textproto" \
    --report_tool=/bin/true --min_repeats="$MIN" --max_repeats="$MAX" "$@" \
    >"$OUT/$name.txt" 2>"$OUT/$name.err" || rc=$?
  local change under
  change=$(sed -n 's/^  RSS under load (MiB) *[0-9.]* *[0-9.]* *\([-+][0-9.]*%\).*/\1/p' "$OUT/$name.txt" | head -1)
  under=$(sed -n 's/^  RSS under load (MiB) *\([0-9.]*\) .*/\1/p' "$OUT/$name.txt" | head -1)
  echo "$name $rc ${change:--} ${under:--}"
}

# rates LABEL FILE: the share of exits 1, 0 and 3 among FILE's gates.
rates() {
  awk -v label="$1" '{ n++; c[$2]++ } END {
    printf "%s: %d of %d regression (%.0f %%), %d no change or pass, %d can'"'"'t tell, %d other\n",
      label, c[1], n, n ? 100 * c[1] / n : 0, c[0], c[3], n - c[0] - c[1] - c[3] }' "$2"
}

: >"$OUT/identical.lst"
for i in $(seq 1 "$PAIRS"); do gate "identical-$i" | tee -a "$OUT/identical.lst"; done
# The base's RSS under load: the median of the identical gates' base medians.
BASE_MIB=$(awk '$4 != "-" { print $4 }' "$OUT/identical.lst" | sort -n |
  awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
[ -n "$BASE_MIB" ] || { echo "gate_rates.sh: no identical gate measured RSS under load (see $OUT/*.err)" >&2; exit 1; }
for pct in 10 25; do
  mb=$(awk -v b="$BASE_MIB" -v p="$pct" 'BEGIN { printf "%.2f", b * p / 100 }')
  : >"$OUT/change-$pct.lst"
  for i in $(seq 1 "$DETECT"); do
    gate "change$pct-$i" --head_command="$SERVICE --retain_mb=$mb" | tee -a "$OUT/change-$pct.lst"
  done
done

echo
echo "gate_rates: $(rates 'false alarms (identical)' "$OUT/identical.lst")"
for pct in 10 25; do
  [ "$DETECT" -gt 0 ] && echo "gate_rates: $(rates "detections (+$pct % of $BASE_MIB MiB retained)" "$OUT/change-$pct.lst")"
done
echo "conditions: command: $0 (RSSLAB_GATE_PAIRS=$PAIRS RSSLAB_GATE_DETECT=$DETECT RSSLAB_GATE_MIN=$MIN RSSLAB_GATE_MAX=$MAX)"
echo "conditions: gate defaults otherwise (--gate=rss_under_load,rss_after_idle,rss_after_trim_global, --floor_mib=1, --floor_pct=5, --alpha=0.05), profile glibc, 4 threads, tests/gate/burst.textproto"
echo "conditions: commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end, $(nproc) CPUs, unpinned, $(( $(date +%s) - START )) s; runs in $OUT"
