#!/bin/sh
# //tools:doc_links_test: tools/check_doc_links.py on the checkout this test
# was built from. README.md and docs/ are its data, but the check reads the
# real tree (the runfiles are symlinks into it): the layout check must see
# every top-level directory, also ones no target declares. Run twice: with
# git's list of tracked files, and without git. The target is
# tagged "external" so a cached pass is never reused after the tree changed.
set -eu
here="$TEST_SRCDIR/$TEST_WORKSPACE"
root=$(dirname "$(readlink -f "$here/README.md")")
/usr/bin/python3 "$here/tools/check_doc_links.py" "$root"
# And as from a source archive with no git (a fresh machine may have none):
# the tree walked, what .gitignore names skipped by path.
exec /usr/bin/python3 "$here/tools/check_doc_links.py" --no_git "$root"
