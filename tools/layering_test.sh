#!/bin/sh
# //tools:layering_test: tools/check_layering.py on the checkout this test
# was built from (the runfiles are symlinks into it, as for
# //tools:function_length_test). Tagged "external": never a cached pass
# after the tree changed.
set -eu
here="$TEST_SRCDIR/$TEST_WORKSPACE"
root=$(dirname "$(readlink -f "$here/README.md")")
exec /usr/bin/python3 "$here/tools/check_layering.py" "$root"
