"""cc_library and cc_binary for python/BUILD.bazel: each target that uses
CPython's headers is declared once per CPython ABI the wheels are built for.

The plain target is Debian 12's CPython 3.11 (@system//:python_headers);
"cp313/NAME" and "cp314/NAME" are the same target against the headers of
the private roots tools/setup/python_root.sh unpacks into .deps/ (//:python3.13_headers,
with that root's pybind11), their deps on other such targets renamed the
same way. The variants are tagged manual: `bazel build //...` does not need
the roots; `./rsslab wheel` and //python:interps_test name them. One Bazel
invocation builds every ABI, and only the files that include Python.h are
compiled again for each.
"""

load("@rules_cc//cc:defs.bzl", _cc_binary = "cc_binary", _cc_library = "cc_library")

PY_HEADERS = "@system//:python_headers"

# ABI tag: the header library of its private root.
ABIS = {
    "cp313": "//:python3.13_headers",
    "cp314": "//:python3.14_headers",
}

def _variant_deps(abi, deps):
    # None if the target does not use CPython's headers (no variants).
    out = []
    changed = False
    for d in deps:
        if d == PY_HEADERS:
            out.append(ABIS[abi])
            changed = True
        elif d.startswith(":") and native.existing_rule(abi + "/" + d[1:]):
            out.append(":%s/%s" % (abi, d[1:]))
            changed = True
        else:
            out.append(d)
    return out if changed else None

def _per_abi(rule, name, deps = [], tags = [], **kwargs):
    rule(name = name, deps = deps, tags = tags, **kwargs)
    for abi in ABIS:
        vdeps = _variant_deps(abi, deps)
        if vdeps != None:
            rule(name = abi + "/" + name, deps = vdeps, tags = tags + ["manual"], **kwargs)

def cc_library(name, **kwargs):
    _per_abi(_cc_library, name, **kwargs)

def cc_binary(name, **kwargs):
    _per_abi(_cc_binary, name, **kwargs)
