#!/bin/bash
# Submits a sweep as a Slurm job array (one task per cell) and the merge
# job after it. Prints the two job ids.
#
#   deploy/slurm/submit.sh SCENARIO RESULTS_DIR [extra sbatch flags...] [-- loadgen flags...]
#
# Flags after `--` go to every cell's rsslab_loadgen (e.g. --command=NAME
# and its --allow_command flags, --proto/--call/--data: sweep.sbatch).
#
# RSSLAB_BIN (default /opt/rsslab/bin) holds rsslab_loadgen and
# rsslab_server; SCENARIO and RESULTS_DIR must be visible on every node.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 SCENARIO RESULTS_DIR [sbatch flags...]" >&2; exit 2; }
export RSSLAB_SCENARIO=$(readlink -f "$1") RSSLAB_RESULTS=$(readlink -f "$2")
shift 2
sbatch_flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do sbatch_flags+=("$1"); shift; done
[ $# -gt 0 ] && shift  # the --
export RSSLAB_BIN=${RSSLAB_BIN:-/opt/rsslab/bin}
n=$("$RSSLAB_BIN/rsslab_loadgen" --scenario="$RSSLAB_SCENARIO" --print_cells --json |
    sed -n 's/.*"cells_total":\([0-9]*\).*/\1/p')
[ -n "$n" ] && [ "$n" -gt 0 ] || { echo "$0: cannot count the cells of $RSSLAB_SCENARIO" >&2; exit 2; }
mkdir -p "$RSSLAB_RESULTS/cells"
array=$(sbatch --parsable --array=0-$((n - 1)) --chdir="$RSSLAB_RESULTS" ${sbatch_flags[@]+"${sbatch_flags[@]}"} \
        "$here/sweep.sbatch" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --dependency=afterany:"$array" --chdir="$RSSLAB_RESULTS" "$here/merge.sbatch")
merge=${merge%%;*}
echo "array job $array ($n cells), merge job $merge; results in $RSSLAB_RESULTS/merged"
