#!/usr/bin/env bash
# Starts the CPython of a private root (.deps/python3.X, made by
# tools/setup/python_root.sh) through that root's own loader and glibc, which
# Debian 12's are too old for:
#
#   tools/pyroot.sh 3.14 -c 'import ssl, sqlite3; print(ssl.OPENSSL_VERSION)'
#   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 tools/pyroot.sh 3.13 app.py
#
# LD_PRELOAD is honoured (the loader reads it); it must name libraries built
# against a glibc no newer than the root's, as Debian 12's allocators are.
# Child processes the interpreter starts with sys.executable run the root's
# python3.X directly and fail on the host's glibc: start them with this script.
set -euo pipefail
ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
v=${1:-}
case "$v" in
  3.13|3.14) shift ;;
  *) echo "pyroot.sh: first argument must be 3.13 or 3.14, got '$v'" >&2; exit 2 ;;
esac
D=$ROOT/.deps/python$v
[ -r "$D/.complete" ] || { echo "pyroot.sh: $D is missing (tools/setup/python_root.sh $v)" >&2; exit 2; }
L=$D/usr/lib/x86_64-linux-gnu
export PYTHONHOME=$D/usr
exec "$L/ld-linux-x86-64.so.2" --library-path "$L" --argv0 "python$v" "$D/usr/bin/python$v" "$@"
