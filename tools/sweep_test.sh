#!/usr/bin/env bash
# tools/sweep.sh's matrix without running it: RSSLAB_SWEEP_PROFILES=all is
# every shipped profile (what rsslab_run --list_profiles shows), the
# default matrix is the documented one, and --print_cells starts no agent
# and writes no results directory.
set -euo pipefail
R=${TEST_SRCDIR}/${TEST_WORKSPACE}
BIN=$(mktemp -d "${TEST_TMPDIR}/bin.XXXX")
for b in agent/rsslab_agent agent/rsslab_run server/rsslab_server loadgen/rsslab_loadgen; do
  ln -s "$R/$b" "$BIN/$(basename "$b")"
done
export RSSLAB_BIN=$BIN RSSLAB_SWEEP_OUT=${TEST_TMPDIR}/out
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$(RSSLAB_SWEEP_PROFILES=all RSSLAB_SWEEP_THREADS=1,4,16,64 RSSLAB_SWEEP_REPEATS=3 RSSLAB_SWEEP_SCALE=1 \
  "$R/tools/sweep.sh" --print_cells)
profiles=$("$BIN/rsslab_run" --profile_file="$R/agent/profiles.textproto" --list_profiles | awk '$2 != "UNAVAILABLE:" { print $1 }')
n=$(wc -w <<<"$profiles")
[ "$n" -ge 11 ] || fail "expected every shipped profile, rsslab_run lists $n"
grep -q "^# matrix [0-9a-f]*: $((n * 4 * 3)) cells" <<<"$out" || fail "all x 4 threads x 3 repeats: $(head -1 <<<"$out")"
for p in $profiles; do
  grep -q " $p/t64/r3\$" <<<"$out" || fail "profile $p missing from the matrix"
done
[ ! -e "${TEST_TMPDIR}/out" ] || fail "--print_cells created the results directory"

# The reduced default: 7 profiles x 1,16,64 x 1 repeat.
out=$("$R/tools/sweep.sh" --print_cells)
grep -q "^# matrix [0-9a-f]*: 21 cells" <<<"$out" || fail "default matrix: $(head -1 <<<"$out")"
grep -q " tcmalloc/t64/r1\$" <<<"$out" || fail "default matrix lacks tcmalloc/t64/r1"
# The loadgen's `sweep` subcommand is --builtin=sweep: the same matrix.
a=$("$BIN/rsslab_loadgen" --builtin=sweep --profiles=glibc,jemalloc --threads_list=1,4 --repeats=1 --print_cells)
b=$("$BIN/rsslab_loadgen" sweep --profiles=glibc,jemalloc --threads_list=1,4 --repeats=1 --print_cells)
[ "$a" = "$b" ] || fail "sweep subcommand differs from --builtin=sweep: $b"
grep -q "^# matrix [0-9a-f]*: 4 cells" <<<"$b" || fail "sweep subcommand matrix: $(head -1 <<<"$b")"
rc=0; "$BIN/rsslab_loadgen" sweep --builtin=seed --print_cells >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "sweep --builtin=seed: exit $rc, expected 2"
echo PASS
