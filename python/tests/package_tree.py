"""The package as Python imports it, from a test's runfiles, without a wheel,
and the check() the package's tests report with.

  root = package_tree.make(WS, TMP)   # then PYTHONPATH=root: import rsslab
  check(cond, "what was checked")      # a failed one is kept in failures

rsslab/*.py and the two Bazel-built extensions under their CPython names
(the wheel's layout, python/wheel/build_wheel.py), copied into TMP/pkg.
"""

import os
import shutil

failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)


def make(ws, tmp):
    root = os.path.join(tmp, "pkg")
    pkg = os.path.join(root, "rsslab")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(pkg)
    src = os.path.join(ws, "python/rsslab")
    for name in os.listdir(src):
        if name.endswith(".py"):
            shutil.copy(os.path.join(src, name), pkg)
    for so in ("_rsslab", "_rsslab_grpc"):
        shutil.copy(os.path.join(ws, "python", so + ".so"),
                    os.path.join(pkg, so + ".cpython-311-x86_64-linux-gnu.so"))
    return root
