# Sourced (bash) by `./rsslab test`: the parts of the suite that setup or
# a step had to skip on this machine (mimalloc 3 or a private CPython root
# not fetched, a step not run), kept in a list so that the suite's last
# lines name them and its exit status is not a pass when something
# promised did not run (docs/TESTING.md, "Skipped parts").
#
#   . tools/setup/promised.sh
#   check_setup_parts "$ROOT"                     # what setup could not make
#   skipped "//python:interps_test" "a private root is missing"
#   skip_summary || exit $?                       # 3 if anything was skipped
#
# RSSLAB_ALLOW_SKIP=1 accepts skipped parts (still listed) with exit 0.

SKIPPED_PARTS=()
ON_REQUEST=()  # skipped because the caller asked (listed, not a failure)

# skipped PART WHY: one line now, and PART in the closing summary.
skipped() {
  SKIPPED_PARTS+=("$1 ($2)")
  echo "rsslab: SKIPPED $1: $2" >&2
}

# skipped_on_request PART HOW: listed in the summary, not a failure.
skipped_on_request() { ON_REQUEST+=("$1 ($2)"); }

# check_setup_parts ROOT: records each part ./rsslab setup promises but did
# not make under ROOT/.deps (setup itself only says so in one line).
check_setup_parts() {
  local root=$1 v
  "$root/tools/mimalloc3.sh" --check \
    || skipped "mimalloc 3 (.deps/mimalloc3)" "not fetched by setup (tools/mimalloc3.sh): the mimalloc3 profiles' tests skip"
  for v in 3.13 3.14; do
    "$root/tools/setup/python_root.sh" --check "$v" \
      || skipped "CPython $v (.deps/python$v)" "not fetched by setup (tools/setup/python_root.sh $v): no cp${v/./} wheel or test"
  done
}

# skip_summary: the suite's closing lines. Status 0 when nothing was
# skipped or RSSLAB_ALLOW_SKIP=1, else 3.
skip_summary() {
  local p
  for p in "${ON_REQUEST[@]}"; do echo "rsslab test: skipped on request: $p"; done
  if [ ${#SKIPPED_PARTS[@]} -eq 0 ]; then
    echo "rsslab test: every part ran"
    return 0
  fi
  echo "rsslab test: ${#SKIPPED_PARTS[@]} promised part(s) SKIPPED:"
  for p in "${SKIPPED_PARTS[@]}"; do echo "  - $p"; done
  if [ "${RSSLAB_ALLOW_SKIP:-0}" = 1 ]; then
    echo "rsslab test: RSSLAB_ALLOW_SKIP=1: exit 0 with the parts above skipped"
    return 0
  fi
  echo "rsslab test: exit 3: not everything ran (RSSLAB_ALLOW_SKIP=1 accepts skipped parts)"
  return 3
}
